import AppStoreSimulator
import CommandLineSupport
import Demo
import Foundation
import Gateway
import IAPCore
import UpstreamHTTP

/// `iapgw-dev demo`: the local App Store simulator and the gateway on loopback, a demo app configured
/// through real files under var/demo (its receipts in a `rollout` routing), two purchases made, and
/// copy-paste curl commands that walk an old-app receipt flow and a new-app transaction flow end to
/// end; then a short rollout that rolls itself back on a planted disagreement, and the migration: a
/// few old-app receipts (one with a planted disagreement) compared in shadow, a small batch compare,
/// the verdict and the dashboard. `--once` walks them itself.
struct DemoCommand: Subcommand {
    let name = "demo"
    let summary = "run the gateway against the built-in App Store simulator, with curl commands to try"
    let usage = """
        usage: iapgw-dev demo [--port N] [--sim-port N] [--dir DIR] [--once] [--local-only-jws] [--pool N]
          --port      gateway port (default 8080)      --sim-port  simulator port (default 8090)
          --dir       where the demo's config, keys and SQLite database go (default var/demo)
          --once      run the flows itself, print each answer, and exit (0 if every answer was as expected)
          --local-only-jws  trust a verified signed transaction without asking the Server API (load tests)
          --pool N    also sign N more purchases, one signed transaction a line in DIR/pool-signed-transactions.txt
                      (new-grant load tests: each one verifies, binds and grants once)
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        var options = DemoHarness.Options()
        // Old app versions' receipts in a rollout: at 0 % verifyReceipt answers everyone with the
        // Server API compared beside it (as in shadow); a cohort is moved to the Server API step by step.
        options.receiptRouting = "rollout"
        options.rolloutPlanXML = DemoRollout.planXML
        options.gatewayPort = try args.value("--port").map { try Self.port($0) } ?? 8080
        options.simulatorPort = try args.value("--sim-port").map { try Self.port($0) } ?? 8090
        let directory = URL(fileURLWithPath: try args.value("--dir") ?? "var/demo", isDirectory: true)
        let once = args.flag("--once")
        options.localOnlyJWS = args.flag("--local-only-jws")
        let pool = try args.value("--pool").map { text throws(UsageError) -> Int in
            guard let n = Int(text), (1...1_000_000).contains(n) else { throw UsageError(message: "--pool must be in 1...1000000") }
            return n
        } ?? 0
        try args.finish()
        // A fresh database each run: the demo's purchases are new each time.
        for file in ["iapgw.sqlite", "iapgw.sqlite-wal", "iapgw.sqlite-shm"] {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(file))
        }
        let logger = once ? Logger.disabled : Logger.standardError()
        let chosen = options
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
        if pool > 0 {
            // Written as signed, a line at a time: held in memory, 100,000 of them (~4 KB each) were
            // copied twice more on the way to the file.
            let path = directory.appendingPathComponent("pool-signed-transactions.txt").path
            guard FileManager.default.createFile(atPath: path, contents: nil), let file = FileHandle(forWritingAtPath: path) else {
                throw UsageError(message: "cannot write \(path)")
            }
            defer { try? file.close() }
            for index in 0..<pool {
                let signed = try demo.simulator.purchaseSignedTransaction(PurchaseRequest(
                    bundleId: demo.bundleId, productId: "com.example.demo.removeads", type: .nonConsumable,
                    owner: "device-pool-\(index)", price: 2_990))
                try file.write(contentsOf: Data((signed + "\n").utf8))
            }
        }
        let status: Int32
        if once {
            let flows = try await Self.walkFlows(demo, receipt: alice.receiptBase64, bob: bob)
            let rollout = try await DemoRollout.walk(demo)
            let migration = try await Self.walkMigration(demo, directory: directory, check: true)
            status = flows == 0 && rollout && migration ? 0 : 1
        } else {
            _ = try await DemoRollout.walk(demo)
            _ = try await Self.walkMigration(demo, directory: directory, check: false)
            status = await Self.printInstructions(demo, receiptFile: receiptFile, signedFile: signedFile, bob: bob)
        }
        await demo.stop()
        return status
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

            # Support: what happened to Bob's attempts and purchases (iapgw audit --app \(demo.bundleId) --account bob)
            curl -s \(auth) \(app)/accounts/bob/history

            # Refund Bob's purchase in the simulator, then ask again (refunds never grant)
            curl -s -X POST \(demo.simulator.baseURL.absoluteString)/admin/transactions/\(bob.transactionId)/refund
            curl -s \(auth) -d '{"account":"bob","transactionId":"\(bob.transactionId)"}' \(app)/verify

            # The rollout: its step, guard and timeline (iapgw rollout status|advance|pause|rollback --app \(demo.bundleId))
            curl -s \(auth) \(app)/rollout

            # The migration: the shadow comparisons and the batch above, the verdict and who a cutover would affect
            curl -s \(auth) \(app)/cutover-impact
            curl -s -H 'Authorization: Bearer \(demo.apiKey)' '\(gw)/dashboard?app=\(demo.bundleId)' -o dashboard.html   # then open dashboard.html
            curl -s -H 'Authorization: Bearer \(demo.apiKey)' '\(gw)/dashboard?app=\(demo.bundleId)&format=csv'

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
        let history = try await call("bob's support history", "GET", "\(app)/accounts/bob/history", nil, expect: 200)
        print("     \(history["attempts"]?.arrayValue?.count ?? 0) attempt(s), \(history["chains"]?.arrayValue?.count ?? 0) purchase chain(s)")
        _ = try demo.simulator.refund(transactionId: bob.transactionId)
        _ = try await call("bob's purchase after a refund", "POST", "\(app)/verify",
                           .object(["account": "bob", "transactionId": .string(bob.transactionId)]), expect: 422)
        print(failures == 0 ? "demo: every flow answered as expected" : "demo: \(failures) flow(s) answered unexpectedly")
        return failures == 0 ? 0 : 1
    }

    /// The migration, over real HTTP: old-app receipts sent under shadow routing (one purchase with
    /// a refund planted in the Server API's answer only), a small batch compare (what `iapgw compare`
    /// runs) over a backlog, then the verdict and the dashboard. With `check`, the dashboard must
    /// state a verdict and list the planted disagreement.
    static func walkMigration(_ demo: DemoHarness, directory: URL, check: Bool) async throws -> Bool {
        let client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration())
        let app = "\(demo.gatewayURL)/v1/apps/\(demo.bundleId)"
        let auth = [("Authorization", "Bearer \(demo.apiKey)")]
        func post(_ url: String, _ body: JSONValue) async throws -> (Int, JSONValue) {
            let r = try await client.send(UpstreamRequest(method: "POST", url: url, headers: auth + [("Content-Type", "application/json")],
                                                          body: Array(body.jsonText.utf8)))
            return (r.status, (try? StrictJSON().parse(r.body)) ?? .null)
        }
        var ok = true
        let comparedBefore = try await demo.parts.migrationReport(bundleId: demo.bundleId).overall.total
        print("\nmigration: old-app receipts outside the rollout's cohort (verifyReceipt answers, the Server API is compared beside it)")
        let owners: [(String, String, TransactionType)] = [
            ("carol", "com.example.demo.pro.monthly", .autoRenewable), ("dave", "com.example.demo.removeads", .nonConsumable),
            ("erin", "com.example.demo.coins100", .consumable), ("frank", "com.example.demo.removeads", .nonConsumable),
        ]
        var planted = ""
        for (account, product, type) in owners {
            let p = try demo.simulator.purchase(PurchaseRequest(
                bundleId: demo.bundleId, productId: product, type: type, owner: "device-\(account)",
                subscriptionGroupIdentifier: type == .autoRenewable ? "demo.pro" : nil,
                price: demo.options.catalog.first { $0.0 == product }?.2 ?? 990))
            if account == "frank" {
                try demo.simulator.plant(.refundOnlyIn(.serverAPI), transactionId: p.transactionId)
                planted = p.transactionId
                print("  planted: the Server API answers \(account)'s \(product) (\(p.transactionId)) as refunded; verifyReceipt does not")
            }
            let (_, nonce) = try await post("\(app)/nonces", .object(["account": .string(account)]))
            let (status, answer) = try await post("\(app)/verify", .object([
                "account": .string(account), "receipt": .string(p.receiptBase64), "nonce": nonce["nonce"] ?? .null,
            ]))
            if status != 200 { ok = false }
            print("\(status == 200 ? "ok  " : "FAIL") \(account)'s receipt (shadow): HTTP \(status) \(answer["verdict"]?.stringValue ?? "")")
        }
        // Shadow comparisons are stored off the request: wait for them (bounded).
        let deadline = Date().addingTimeInterval(10)
        while (try await demo.parts.migrationReport(bundleId: demo.bundleId).overall.total) < comparedBefore + owners.count,
              Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }

        // A small backlog, as `iapgw compare --app \(demo.bundleId) --input receipts.jsonl` compares it.
        let backlog = try (1...3).map { i -> BatchReceipt in
            let p = try demo.simulator.purchase(PurchaseRequest(
                bundleId: demo.bundleId, productId: "com.example.demo.pro.monthly", type: .autoRenewable,
                owner: "device-backlog-\(i)", subscriptionGroupIdentifier: "demo.pro", price: 4_990))
            return BatchReceipt(receipt: p.receiptBase64, account: "backlog-\(i)", line: i)
        }
        print("migration: iapgw compare over a backlog of \(backlog.count) stored receipts")
        let summary = try await demo.parts.batchComparer(bundleId: demo.bundleId).run(backlog)
        print(summary.text)
        let report = try await demo.parts.migrationReport(bundleId: demo.bundleId)
        print(report.verdictText)
        print("""
            dashboard: \(demo.gatewayURL)/dashboard?app=\(demo.bundleId)  (the app's key in the header, never in the URL)
              curl -s -H 'Authorization: Bearer \(demo.apiKey)' '\(demo.gatewayURL)/dashboard?app=\(demo.bundleId)' -o dashboard.html
            """)
        guard check else { return ok }
        let page = try await client.send(UpstreamRequest(method: "GET", url: "\(demo.gatewayURL)/dashboard?app=\(demo.bundleId)",
                                                         headers: auth))
        let html = String(decoding: page.body, as: UTF8.self)
        let verdict = page.status == 200 && html.contains("<div id=\"verdict\" class=\"verdict not-ready\">")
        let listed = html.contains("<td class=\"id\">\(planted)</td>") && html.contains("would lose access")
        print("\(verdict ? "ok  " : "FAIL") the dashboard states a verdict: \(report.verdict.label)")
        print("\(listed ? "ok  " : "FAIL") the dashboard lists the planted disagreement (\(planted)) and its cutover impact")
        return ok && verdict && listed
    }
}
