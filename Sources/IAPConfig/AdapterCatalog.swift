import IAPCore

/// The adapters a gateway runs, as an app file's routing may name them: each adapter's id and the
/// kinds of evidence it verifies. The gateway's assembly makes it from its registered adapter
/// factories and reads the configuration with it (serve, config check), so an adapter registered
/// there can be routed to, and a routing entry naming no registered adapter stops the start.
public struct AdapterCatalog: Sendable, Equatable {
    public private(set) var kinds: [AdapterID: Set<AppPolicy.EvidenceKind>] = [:]

    public init(_ adapters: [(AdapterID, [AppPolicy.EvidenceKind])]) {
        for (id, kinds) in adapters { self.kinds[id, default: []].formUnion(kinds) }
    }

    /// The two adapters every gateway build registers (verifyReceipt; the App Store Server API):
    /// the catalog of a configuration read without an assembly (tools, fuzzers, config tests).
    public static let standard = AdapterCatalog([
        (.verifyReceipt, [.receipt]),
        (.serverAPI, [.receipt, .transactionId, .signedTransaction, .signedAppTransaction, .appTransactionId]),
    ])

    public var ids: [AdapterID] { kinds.keys.sorted { $0.rawValue < $1.rawValue } }

    /// Every kind some adapter verifies: the keys an app file's `routing` may have.
    public var evidenceKinds: [AppPolicy.EvidenceKind] {
        Set(kinds.values.joined()).sorted { $0.rawValue < $1.rawValue }
    }

    public func adapters(verifying kind: AppPolicy.EvidenceKind) -> [AdapterID] {
        ids.filter { kinds[$0]!.contains(kind) }
    }

    /// Why `mode` cannot route `kind` here (an adapter it names is unknown, or verifies other kinds); nil: it can.
    public func problem(routing kind: AppPolicy.EvidenceKind, to mode: AppPolicy.RoutingMode) -> String? {
        for id in mode.adapters {
            guard let verified = kinds[id] else {
                return "names adapter \"\(id)\", which is not one of the known adapters (\(ids.map(\.rawValue).joined(separator: ", ")))"
            }
            guard verified.contains(kind) else {
                let able = adapters(verifying: kind).map(\.rawValue).joined(separator: ", ")
                return "\(mode) routes to \(id), which does not verify \(kind) evidence (\(able.isEmpty ? "no adapter does" : "verified by: \(able)"))"
            }
        }
        return nil
    }
}
