import Foundation

/// A finding about a loaded policy that decoding alone cannot see: files that must exist,
/// secrets that are not available yet. Messages name references, never secret values.
public struct ConfigDiagnostic: Sendable, Equatable, CustomStringConvertible {
    public enum Severity: String, Sendable { case error, warning }
    public var severity: Severity
    public var message: String
    public var description: String { "\(severity.rawValue): \(message)" }
}

extension AppPolicy {
    /// Trust roots that are missing are errors (nothing could be verified); secrets not available
    /// now are warnings (they may be provided only where the gateway runs).
    public func diagnostics(environment: [String: String] = ProcessInfo.processInfo.environment) -> [ConfigDiagnostic] {
        trustRootProblems.map { ConfigDiagnostic(severity: .error, message: $0) }
            + secretSources.compactMap { setting, source in
                SecretReference.availability(source, environment: environment)
                    .map { ConfigDiagnostic(severity: .warning, message: "\(setting): \($0)") }
            }
    }

    /// The trust-root files that cannot be read now (this touches the disk: off the cooperative pool
    /// wherever a hung mount must not stall it).
    public var trustRootProblems: [String] {
        [("jws", trustRoots.jws), ("receipts", trustRoots.receipts)].flatMap { kind, roots in
            roots.filter { !FileManager.default.isReadableFile(atPath: $0.path) }.map { "trustRoots.\(kind): \($0.path) not found" }
        }
    }

    /// One line for operators: environments, catalog size, routing, and where secrets come from.
    public var summary: String {
        let envs = allowedEnvironments.map(\.rawValue).sorted().joined(separator: ",")
        var parts = ["environments \(envs)"]
        if let appAppleId { parts.append("appAppleId \(appAppleId)") }
        if allowLocalTestEnvironments { parts.append("local test environments allowed") }
        if !sandboxAccounts.isEmpty { parts.append("\(sandboxAccounts.count) sandbox account(s)") }
        parts.append("\(productCatalog.count) product\(productCatalog.count == 1 ? "" : "s")")
        let routed = EvidenceKind.configured + routing.modes.keys.filter { !EvidenceKind.configured.contains($0) }.sorted { $0.rawValue < $1.rawValue }
        parts.append("routing " + routed.map { "\($0.rawValue)=\(routing[$0].map(String.init(describing:)) ?? "-")" }.joined(separator: " "))
        parts.append("family sharing \(familySharingPolicy.rawValue)")
        parts.append("online checks \(onlineChecks ? "on" : "off")")
        if localOnlyJWS { parts.append("local-only JWS") }
        return parts.joined(separator: "; ")
    }
}
