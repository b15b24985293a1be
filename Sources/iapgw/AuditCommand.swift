import CommandLineSupport
import Foundation
import Gateway
import IAPConfig
import IAPCore
import Ledger

/// `iapgw audit`: what support needs for "I paid but it's locked", read from the ledger directly
/// (the same answer as `GET /v1/apps/{bundleId}/accounts/{account}/history`), or, for an order ID a
/// customer quotes, from Apple and the ledger (`GET /v1/apps/{bundleId}/orders/{orderId}`).
struct AuditCommand: Subcommand {
    let name = "audit"
    let summary = "an account's (or a transaction's) verification attempts and purchase history, for support"
    let usage = """
        usage: iapgw audit --app BUNDLE (--account A | --transaction-id T | --order-id O) [--since ISO8601] [--limit N]
                           [--config DIR] [--mappings DIR]
          prints JSON: each attempt (time, request id, evidence kind, SHA-256 prefix of the evidence,
          X-Client-Version, environment, Apple's status, verdict, code), newest first (--limit, default
          100), and each purchase chain with its owner, grants, refunds, state and notifications;
          --order-id (the order ID of Apple's receipt e-mail) asks Apple for the order's transactions
          (Look Up Order ID, verified) and prints each with its owner here and each owner's history
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        let config = URL(fileURLWithPath: try args.value("--config") ?? "Config", isDirectory: true)
        let mappings = URL(fileURLWithPath: try args.value("--mappings") ?? "Mappings", isDirectory: true)
        guard let bundleId = try args.value("--app") else { throw UsageError(message: "audit needs --app BUNDLE") }
        let account = try args.value("--account")
        let transactionId = try args.value("--transaction-id")
        let orderId = try args.value("--order-id")
        let since = try args.value("--since").map(NotificationsCommand.parseTime) ?? 0
        let limitText = try args.value("--limit")
        try args.finish()
        guard [account, transactionId, orderId].compactMap({ $0 }).count == 1 else {
            throw UsageError(message: "exactly one of --account, --transaction-id and --order-id")
        }
        let limit = Int(limitText ?? String(HistoryEndpoint.defaultLimit)) ?? 0
        guard (1...HistoryEndpoint.maxLimit).contains(limit) else {
            throw UsageError(message: "--limit must be 1 to \(HistoryEndpoint.maxLimit)")
        }
        let (_, parts) = try await GatewayAssembly.open(configDirectory: config, mappingsDirectory: mappings,
                                                        logger: Logger.standardError())
        let answer: JSONValue
        if let orderId {
            answer = try await parts.auditOrder(bundleId: bundleId, orderId: orderId, since: since, limit: limit)
        } else {
            let subject: SupportSubject = account.map { .account($0) } ?? .transaction(transactionId!)
            answer = try await parts.audit(bundleId: bundleId, subject: subject, since: since, limit: limit)
        }
        print(answer.jsonText)
        return 0
    }
}
