import Foundation
import IAPCore

/// Where a secret lives (an environment variable or a file), never the secret itself.
///
/// The value is given only by `resolve(environment:)`, at the moment it is used, and is never kept
/// in this type: printing, dumping or comparing a reference can therefore never leak a secret.
/// Files are read by `SecretFiles`, off the request path (a rotated file is used within its refresh delay).
/// `previous` names the secret being rotated out, accepted beside the current one until removed:
/// its file is never served stale, so deleting it revokes it at the next refresh.
public struct SecretReference: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public enum Source: Sendable, Equatable, CustomStringConvertible {
        case environmentVariable(String)
        case file(URL)

        public var description: String {
            switch self {
            case .environmentVariable(let name): "env:\(name)"
            case .file(let url): "file:\(url.path)"
            }
        }
    }

    /// A secret file larger than this is not a shared secret or a `.p8` key.
    public static let maxSecretFileBytes = 64 * 1024

    public let source: Source
    public let previous: Source?

    public init(_ source: Source, previous: Source? = nil) {
        self.source = source
        self.previous = previous
    }

    public var description: String {
        previous.map { "\(source) (previous \($0))" } ?? source.description
    }

    public var debugDescription: String { "SecretReference(\(description))" }

    /// The secret as text (a shared secret, an API key), surrounding whitespace removed.
    public func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) throws(VerificationError) -> String {
        try Self.text(try Self.read(source, environment: environment), source)
    }

    /// The secret as bytes (a `.p8` PEM file), unchanged.
    public func resolveData(environment: [String: String] = ProcessInfo.processInfo.environment) throws(VerificationError) -> Data {
        try Self.read(source, environment: environment)
    }

    /// The secret being rotated out, if one is named; an error while its file's last read failed.
    public func resolvePrevious(environment: [String: String] = ProcessInfo.processInfo.environment) throws(VerificationError) -> String? {
        guard let previous else { return nil }
        return try Self.text(try Self.read(previous, environment: environment, keepingLastGood: false), previous)
    }

    /// Whether the secret can be read now, without reading more than needed; for `config check`.
    public static func availability(_ source: Source, environment: [String: String]) -> String? {
        switch source {
        case .environmentVariable(let name):
            guard let value = environment[name] else { return "\(source) is not set" }
            return value.isEmpty ? "\(source) is empty" : nil
        case .file(let url):
            return FileManager.default.isReadableFile(atPath: url.path) ? nil : "\(source) is not readable"
        }
    }

    private static func text(_ data: Data, _ source: Source) throws(VerificationError) -> String {
        guard let s = String(data: data, encoding: .utf8) else {
            throw VerificationError(.invalidConfiguration, "secret \(source) is not UTF-8 text")
        }
        let trimmed = s.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw VerificationError(.invalidConfiguration, "secret \(source) is empty") }
        return trimmed
    }

    private static func read(_ source: Source, environment: [String: String],
                             keepingLastGood: Bool = true) throws(VerificationError) -> Data {
        switch source {
        case .environmentVariable(let name):
            guard let value = environment[name], !value.isEmpty else {
                throw VerificationError(.invalidConfiguration, "secret \(source) is not set")
            }
            return Data(value.utf8)
        case .file(let url):
            return try SecretFiles.shared.data(url, keepingLastGood: keepingLastGood)
        }
    }

    /// POSIX environment variable names; anything else is a typo or a pasted secret.
    static func isValidEnvironmentName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first == "_" || (first.isASCII && first.properties.isAlphabetic) else {
            return false
        }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) }
            && name.count <= 128
    }
}
