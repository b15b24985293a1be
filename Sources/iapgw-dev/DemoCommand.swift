import AppStoreSimulator
import CommandLineSupport
import Demo
import Foundation
import IAPCore
import UpstreamHTTP

/// `iapgw-dev demo`: the local App Store simulator and the gateway on loopback, a demo app configured
/// through real files under var/demo, two purchases made, and copy-paste curl commands that walk an
/// old-app receipt flow and a new-app transaction flow end to end. `--once` walks them itself.
struct DemoCommand: Subcommand {
    let name = "demo"
    let summary = "run the gateway against the built-in App Store simulator, with curl commands to try"
    let usage = """
        usage: iapgw-dev demo [--port N] [--sim-port N] [--dir DIR] [--once] [--local-only-jws]
          --port      gateway port (default 8080)      --sim-port  simulator port (default 8090)
          --dir       where the demo's config, keys and SQLite database go (default var/demo)
          --once      run the flows itself, print each answer, and exit (0 if every answer was as expected)
          --local-only-jws  trust a verified signed transaction without asking the Server API (load tests)
        """

    func run(_ args: inout CommandLineArguments) throws -> Int32 {
        var options = DemoHarness.Options()
        options.gatewayPort = try args.value("--port").map { try Self.port($0) } ?? 8080
        options.simulatorPort = try args.value("--sim-port").map { try Self.port($0) } ?? 8090
        let directory = URL(fileURLWithPath: try args.value("--dir") ?? "var/demo", isDirectory: true)
        let once = args.flag("--once")
        options.localOnlyJWS = args.flag("--local-only-jws")
        try args.finish()
        // A fresh database each run: the demo's purchases are new each time.
        for file in ["iapgw.sqlite", "iapgw.sqlite-wal", "iapgw.sqlite-shm"] {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(file))
        }
        let logger = once ? Logger.disabled : Logger.standardError()
        let chosen = options
        return try runAsync {
            let demo = try await DemoHarness.start(directory: directory, options: chosen, logger: logger)
            let alice = try demo.simulator.purchase(PurchaseRequest(
                bundleId: demo.bundleId, productId: "com.example.demo.pro.monthly", type: .autoRenewable,
                owner: "device-alice", subscriptionGroupIdentifier: "demo.pro", price: 4_990, offer: .freeTrial))
            let bob = try demo.simulator.purchase(PurchaseRequest(
                bundleId: demo.bundleId, productId: "com.example.demo.removeads", type: .nonConsumable,
                owner: "device-bob", price: 2_990))
            let receiptFile = directory.appendingPathComponent("alice-receipt.b64")
            let signedFile = directory.appendingPathComponent("bob-signed-transaction.jws")
            try alice.receiptBase64.write(to: receiptFile, atomically: true, encoding: .utf8)
            try bob.signedTransaction.write(to: signedFile, atomically: true, encoding: .utf8)
            let status: Int32 = once
                ? try await Self.walkFlows(demo, receipt: alice.receiptBase64, bob: bob)
                : await Self.printInstructions(demo, receiptFile: receiptFile, signedFile: signedFile, bob: bob)
            await demo.stop()
            return status
        }
    }

    static func port(_ text: String) throws(UsageError) -> Int {
        guard let p = Int(text), (0...65535).contains(p) else { throw UsageError(message: "not a port: \(text)") }
        return p
    }

    static func printInstructions(_ demo: DemoHarness, receiptFile: URL, signedFile: URL, bob: SimulatedPurchase) async -> Int32 {
        let gw = demo.gatewayURL
        let app = "\(gw)/v1/apps/\(demo.bundleId)"
        let auth = "-H 'Authorization: Bearer \(demo.apiKey)' -H 'Content-Type: application/json'"
        print("""
            IAPGateway demo: gateway \(gw), App Store simulator \(demo.simulator.baseURL.absoluteString)
            Config, keys and the SQLite ledger are in \(demo.directory.path) (the demo's own, made for this run).

            # Old app version: a legacy receipt, with a single-use nonce bound to the account
            NONCE=$(curl -s \(auth) -d '{"account":"alice"}' \(app)/nonces | sed 's/.*"nonce":"\\([^"]*\\)".*/\\1/')
            printf '{"account":"alice","nonce":"%s","receipt":"%s"}' "$NONCE" "$(cat \(receiptFile.path))" \\
              | curl -s \(auth) --data-binary @- \(app)/verify

            # New app version: a transaction ID, then the StoreKit 2 signed transaction
            curl -s \(auth) -d '{"account":"bob","transactionId":"\(bob.transactionId)"}' \(app)/verify
            printf '{"account":"bob","signedTransaction":"%s"}' "$(cat \(signedFile.path))" \\
              | curl -s \(auth) --data-binary @- \(app)/verify

            # Someone else replays Bob's purchase: 409 TRANSACTION_BOUND_TO_OTHER_ACCOUNT
            curl -s \(auth) -d '{"account":"mallory","transactionId":"\(bob.transactionId)"}' \(app)/verify

            # What each account may use now
            curl -s \(auth) \(app)/accounts/alice/entitlements
            curl -s \(auth) \(app)/accounts/bob/entitlements

            # Refund Bob's purchase in the simulator, then ask again (refunds never grant)
            curl -s -X POST \(demo.simulator.baseURL.absoluteString)/admin/transactions/\(bob.transactionId)/refund
            curl -s \(auth) -d '{"account":"bob","transactionId":"\(bob.transactionId)"}' \(app)/verify

            curl -s \(gw)/healthz; curl -s \(gw)/readyz; curl -s \(gw)/openapi.json | head -c 200

            Ctrl-C stops the demo.
            """)
        fflush(nil)  // scripts read these lines from a file while the demo runs (nil: every stream)
        _ = await waitForTerminationSignal()
        return 0
    }

    /// The same flows, walked in-process over real HTTP; each step prints its status and verdict.
    static func walkFlows(_ demo: DemoHarness, receipt: String, bob: SimulatedPurchase) async throws -> Int32 {
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration())
        let app = "\(demo.gatewayURL)/v1/apps/\(demo.bundleId)"
        var failures = 0
        func call(_ step: String, _ method: String, _ url: String, _ body: JSONValue?, expect: Int) async throws -> JSONValue {
            var headers = [("Authorization", "Bearer \(demo.apiKey)")]
            if body != nil { headers.append(("Content-Type", "application/json")) }
            let response = try await client.send(UpstreamRequest(method: method, url: url, headers: headers,
                                                                 body: body.map { Array($0.jsonText.utf8) }))
            let json = (try? StrictJSON().parse(response.body)) ?? .null
            let summary = json["error"].map { "\($0["code"]?.stringValue ?? "") \($0["message"]?.stringValue ?? "")" } ?? json["verdict"]?.stringValue
                ?? json["entitlements"].map { "\($0.arrayValue?.count ?? 0) entitlement(s)" } ?? "ok"
            let ok = response.status == expect
            if !ok { failures += 1 }
            print("\(ok ? "ok  " : "FAIL") \(step): HTTP \(response.status) \(summary)")
            return json
        }
        let nonce = try await call("issue a nonce for alice", "POST", "\(app)/nonces", .object(["account": "alice"]), expect: 200)
        _ = try await call("alice's legacy receipt (verifyReceipt)", "POST", "\(app)/verify",
                           .object(["account": "alice", "receipt": .string(receipt), "nonce": nonce["nonce"] ?? .null]), expect: 200)
        _ = try await call("the same nonce again", "POST", "\(app)/verify",
                           .object(["account": "alice", "receipt": .string(receipt), "nonce": nonce["nonce"] ?? .null]), expect: 422)
        _ = try await call("bob's transaction ID (Server API)", "POST", "\(app)/verify",
                           .object(["account": "bob", "transactionId": .string(bob.transactionId)]), expect: 200)
        _ = try await call("bob's signed transaction (JWS + Server API)", "POST", "\(app)/verify",
                           .object(["account": "bob", "signedTransaction": .string(bob.signedTransaction)]), expect: 200)
        _ = try await call("mallory replays bob's purchase", "POST", "\(app)/verify",
                           .object(["account": "mallory", "transactionId": .string(bob.transactionId)]), expect: 409)
        _ = try await call("alice's entitlements", "GET", "\(app)/accounts/alice/entitlements", nil, expect: 200)
        _ = try demo.simulator.refund(transactionId: bob.transactionId)
        _ = try await call("bob's purchase after a refund", "POST", "\(app)/verify",
                           .object(["account": "bob", "transactionId": .string(bob.transactionId)]), expect: 422)
        print(failures == 0 ? "demo: every flow answered as expected" : "demo: \(failures) flow(s) answered unexpectedly")
        return failures == 0 ? 0 : 1
    }
}
