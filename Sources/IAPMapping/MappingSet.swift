import Foundation
import IAPCore

/// Every mapping file under a directory (`<dir>/<source>/<version>.json`), all versions kept:
/// a record produced by verifyReceipt/v1 stays explainable after v2 exists.
public struct MappingSet: Sendable {
    /// Source → files ordered by version number.
    private let bySource: [String: [MappingFile]]

    public init(_ files: [MappingFile]) throws(VerificationError) {
        var bySource: [String: [MappingFile]] = [:]
        for file in files {
            if let other = bySource[file.source]?.first(where: { $0.version == file.version }) {
                throw VerificationError(.invalidMapping, "\(file.file): \(file.id) is also declared by \(other.file)")
            }
            bySource[file.source, default: []].append(file)
        }
        self.bySource = bySource.mapValues { $0.sorted { $0.versionNumber < $1.versionNumber } }
    }

    /// Loads every file, refusing the whole set on the first bad one (a gateway must not start
    /// with a mapping it cannot read).
    public static func load(directory: URL) throws(VerificationError) -> MappingSet {
        var files: [MappingFile] = []
        for outcome in try check(directory: directory) {
            switch outcome.result {
            case .success(let file): files.append(file)
            case .failure(let error): throw error
            }
        }
        return try MappingSet(files)
    }

    public struct CheckOutcome: Sendable {
        public let path: String
        public let result: Result<MappingFile, VerificationError>
    }

    /// Validates every `*.json` under `<dir>/<source>/`, one outcome per file, sorted by path. The
    /// file's `source` and `version` must match its folder and name, so the path says what it is.
    public static func check(directory: URL) throws(VerificationError) -> [CheckOutcome] {
        let fm = FileManager.default
        let sourceDirs: [String]
        do {
            sourceDirs = try fm.contentsOfDirectory(atPath: directory.path).sorted()
        } catch {
            throw VerificationError(.invalidMapping, "\(directory.path): not a readable directory")
        }
        var outcomes: [CheckOutcome] = []
        for sourceName in sourceDirs {
            let sourceURL = directory.appendingPathComponent(sourceName)
            var isDir: ObjCBool = false
            guard fm.fileExists(atPath: sourceURL.path, isDirectory: &isDir), isDir.boolValue else { continue }
            let names = ((try? fm.contentsOfDirectory(atPath: sourceURL.path)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
            for name in names {
                let url = sourceURL.appendingPathComponent(name)
                let result: Result<MappingFile, VerificationError>
                do throws(VerificationError) {
                    let file = try MappingFile.load(contentsOf: url)
                    let version = String(name.dropLast(".json".count))
                    guard file.source == sourceName, file.version == version else {
                        throw VerificationError(.invalidMapping,
                                                "\(url.path): declares \(file.id) but lives at \(sourceName)/\(version)")
                    }
                    result = .success(file)
                } catch {
                    result = .failure(error)
                }
                outcomes.append(CheckOutcome(path: url.path, result: result))
            }
        }
        return outcomes
    }

    public var sources: [String] { bySource.keys.sorted() }
    public var files: [MappingFile] { sources.flatMap { bySource[$0]! } }
    public func versions(source: String) -> [String] { bySource[source]?.map(\.version) ?? [] }
    public func latest(source: String) -> MappingFile? { bySource[source]?.last }
    public func version(source: String, _ version: String) -> MappingFile? {
        bySource[source]?.first { $0.version == version }
    }
    /// "verifyReceipt/v1" → that file (what a record's `mappingVersion` names).
    public func file(id: String) -> MappingFile? {
        let parts = id.split(separator: "/", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return nil }
        return version(source: parts[0], parts[1])
    }
}
