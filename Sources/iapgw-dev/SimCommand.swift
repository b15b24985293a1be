import AppStoreSimulator
import CommandLineSupport
import Foundation

/// `iapgw-dev sim`: the local App Store on its own, for a gateway started separately (`iapgw serve`
/// with upstream URLs pointing here) or for poking at Apple's wire formats by hand.
struct SimCommand: Subcommand {
    let name = "sim"
    let summary = "run the local App Store simulator (verifyReceipt, Server API, admin API) on loopback"
    let usage = """
        usage: iapgw-dev sim [--port N] [--trust-root FILE]
          --port        listen port on 127.0.0.1 (default 8090)
          --trust-root  write the simulator's root certificate (DER) here, to pin in an app policy
          Admin API (JSON): POST /admin/apps, POST /admin/purchases, POST /admin/subscriptions/{id}/renew|expire|change-product,
          POST /admin/transactions/{id}/refund|revoke|notify, GET /admin/receipts/{Production|Sandbox}/{bundleId}/{owner},
          PUT|DELETE /admin/faults[/{all|production|sandbox}], GET /admin/trust-root.
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        let port = try args.value("--port").map { try DemoCommand.port($0) } ?? 8090
        let trustRoot = try args.value("--trust-root")
        try args.finish()
        let simulator = try AppStoreSimulator()
        try await simulator.start(port: port)
        if let trustRoot { try simulator.writeTrustRoot(to: URL(fileURLWithPath: trustRoot)) }
        print("""
            App Store simulator on \(simulator.baseURL.absoluteString)
              verifyReceipt:  \(simulator.productionVerifyReceiptURL)  \(simulator.sandboxVerifyReceiptURL)
              Server API:     \(simulator.productionBaseURL)  \(simulator.sandboxBaseURL)
              admin API:      \(simulator.baseURL.absoluteString)/admin/...
            Ctrl-C stops it.
            """)
        fflush(nil)
        _ = await waitForTerminationSignal()
        await simulator.stop()
        return 0
    }
}
