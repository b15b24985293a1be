import Foundation
import IAPCore

/// Loads and checks the gateway's configuration folder:
///
///     Config/gateway.xml | gateway.plist     (optional: defaults otherwise)
///     Config/apps/<bundleId>.plist | .xml    (one per app, never both)
///
/// Every refusal is `INVALID_CONFIGURATION` (or `INPUT_TOO_LARGE`) with `<file>:<line or key path>: <reason>`.
public enum ConfigLoader {
    public static let maxFileBytes = ConfigLimits.maxFileBytes

    /// Everything the gateway needs at start.
    public struct Configuration: Sendable, Equatable {
        public var gateway: GatewayConfig
        /// `nil` when no gateway file exists and the defaults apply.
        public var gatewayFile: URL?
        public var apps: [String: AppPolicy]
    }

    /// The outcome for one file in the apps folder, for reports that list every problem at once.
    public struct AppFileResult: Sendable {
        public var file: URL
        public var displayName: String
        public var format: ConfigFormat?
        public var result: Result<AppPolicy, VerificationError>
    }

    // MARK: In-memory entry points (tests, fuzzing)

    /// Decodes one app file's bytes. `expectedBundleId` is the file name's bundle id, if it has one.
    /// `adapters`: what its routing may name.
    public static func decodeAppPolicy(_ data: Data, format: ConfigFormat, displayName: String,
                                       baseDirectory: URL, expectedBundleId: String? = nil,
                                       adapters: AdapterCatalog = .standard) throws(VerificationError) -> AppPolicy {
        let tree = try ConfigFormat.readTree(data, format: format, displayName: displayName, rootElement: "app")
        return try AppPolicyDecoder(file: displayName, baseDirectory: baseDirectory, adapters: adapters)
            .decode(tree, expectedBundleId: expectedBundleId)
    }

    public static func decodeGateway(_ data: Data, format: ConfigFormat, displayName: String,
                                     baseDirectory: URL) throws(VerificationError) -> GatewayConfig {
        let tree = try ConfigFormat.readTree(data, format: format, displayName: displayName, rootElement: "gateway")
        return try GatewayConfigDecoder(file: displayName, baseDirectory: baseDirectory).decode(tree)
    }

    // MARK: Files

    public static func loadAppPolicy(file: URL, adapters: AdapterCatalog = .standard) throws(VerificationError) -> AppPolicy {
        let (name, format) = try classify(file)
        return try decodeAppPolicy(read(file), format: format, displayName: display(file),
                                   baseDirectory: file.deletingLastPathComponent(), expectedBundleId: name, adapters: adapters)
    }

    public static func loadGateway(file: URL) throws(VerificationError) -> GatewayConfig {
        let (_, format) = try classify(file)
        return try decodeGateway(read(file), format: format, displayName: display(file),
                                 baseDirectory: file.deletingLastPathComponent())
    }

    /// Every app in `directory`, keyed by bundle id; the first problem (in file-name order) is thrown.
    public static func loadApps(directory: URL, adapters: AdapterCatalog = .standard) throws(VerificationError) -> [String: AppPolicy] {
        var apps: [String: AppPolicy] = [:]
        for entry in try checkApps(directory: directory, adapters: adapters) {
            switch entry.result {
            case .success(let policy): apps[policy.bundleId] = policy
            case .failure(let error): throw error
            }
        }
        return apps
    }

    /// Like `loadApps`, but reports every file's outcome instead of stopping at the first problem.
    public static func checkApps(directory: URL, adapters: AdapterCatalog = .standard) throws(VerificationError) -> [AppFileResult] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw VerificationError(.invalidConfiguration, "\(display(directory)): cannot list the apps folder")
        }
        var results: [AppFileResult] = []
        var formatsByBundle: [String: [String]] = [:]
        for name in names.sorted() where !name.hasPrefix(".") {
            let file = directory.appendingPathComponent(name)
            do throws(VerificationError) {
                let (bundleId, format) = try classify(file)
                formatsByBundle[bundleId, default: []].append(name)
                let policy = try loadAppPolicy(file: file, adapters: adapters)
                results.append(AppFileResult(file: file, displayName: display(file), format: format, result: .success(policy)))
            } catch {
                results.append(AppFileResult(file: file, displayName: display(file),
                                             format: ConfigFormat(rawValue: file.pathExtension), result: .failure(error)))
            }
        }
        for (bundleId, files) in formatsByBundle where files.count > 1 {
            let error = VerificationError(.invalidConfiguration,
                "\(display(directory)): \(bundleId) is configured twice (\(files.joined(separator: ", "))): keep one file")
            for i in results.indices where files.contains(results[i].file.lastPathComponent) {
                results[i].result = .failure(error)
            }
        }
        return results
    }

    /// The gateway file (if any) and every app it points at, their routing checked against `adapters`.
    public static func loadAll(configDirectory: URL, adapters: AdapterCatalog = .standard) throws(VerificationError) -> Configuration {
        let gatewayFile = try findGatewayFile(configDirectory: configDirectory)
        let gateway = try gatewayFile.map { f throws(VerificationError) in try loadGateway(file: f) }
            ?? GatewayConfig(appsDirectory: configDirectory.appendingPathComponent("apps"))
        return Configuration(gateway: gateway, gatewayFile: gatewayFile, apps: try loadApps(directory: gateway.appsDirectory, adapters: adapters))
    }

    /// `gateway.xml` or `gateway.plist`; both is refused, neither means defaults.
    public static func findGatewayFile(configDirectory: URL) throws(VerificationError) -> URL? {
        let candidates = ConfigFormat.allCases.map { configDirectory.appendingPathComponent("gateway.\($0.rawValue)") }
            .filter { FileManager.default.fileExists(atPath: $0.path) }
        guard candidates.count <= 1 else {
            throw VerificationError(.invalidConfiguration,
                "\(display(configDirectory)): both gateway.plist and gateway.xml exist: keep one")
        }
        return candidates.first
    }

    // MARK: Helpers

    /// A path as the operator typed it (relative stays relative), for messages.
    static func display(_ url: URL) -> String { url.relativePath }

    private static func classify(_ file: URL) throws(VerificationError) -> (name: String, format: ConfigFormat) {
        guard let format = ConfigFormat(rawValue: file.pathExtension) else {
            throw VerificationError(.invalidConfiguration, "\(display(file)): not a .plist or .xml configuration file")
        }
        let name = file.deletingPathExtension().lastPathComponent
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }) else {
            throw VerificationError(.invalidConfiguration, "\(display(file)): file name is not a bundle id")
        }
        return (name, format)
    }

    private static func read(_ file: URL) throws(VerificationError) -> Data {
        let attributes = try? FileManager.default.attributesOfItem(atPath: file.path)
        if let size = attributes?[.size] as? NSNumber, size.intValue > maxFileBytes {
            throw VerificationError(.inputTooLarge, "\(display(file)): \(size.intValue) bytes exceeds the \(maxFileBytes)-byte limit for a configuration file")
        }
        guard let data = try? Data(contentsOf: file) else {
            throw VerificationError(.invalidConfiguration, "\(display(file)): cannot be read")
        }
        return data
    }
}
