import AppStoreSimulator
import Foundation
import Gateway
import IAPConfig
import IAPCore
import TestSupport
import XCTest

/// Receipts under a `rollout` routing, end to end (real HTTP, the simulator's receipts and JWS), on
/// SQLite and, where `IAPGW_TEST_POSTGRES_URL` is set, on PostgreSQL: a sticky cohort answered by
/// the Server API, moved by hand or by the gateway itself, rolled back by its guard, on every
/// instance of one ledger alike.
final class RolloutTests: XCTestCase {
    /// Steps of 5, 50 and 100 %, no dwell, one compared chain, the guard every second.
    private static func plan(autoAdvance: Bool = false) -> String {
        """
        <steps type="array"><item type="integer">5</item><item type="integer">50</item><item type="integer">100</item></steps>
        <minimumDwellSeconds type="integer">0</minimumDwellSeconds>
        <minimumComparedChains type="integer">1</minimumComparedChains>
        <autoAdvance type="bool">\(autoAdvance)</autoAdvance>
        <guardIntervalSeconds type="integer">1</guardIntervalSeconds>
        """
    }

    /// An account in the demo app's first 5 %, and one outside its first 50 %.
    private static let insider = account { $0 < 500 }
    private static let outsider = account { $0 >= 5000 }

    private static func account(_ where: (Int) -> Bool) -> String {
        (0...).lazy.map { "acct\($0)" }.first { `where`(RolloutCohort.point(bundleId: "com.example.demo", account: $0)) }!
    }

    /// The demo gateway with receipts in a rollout, on this run's engine (`storageURL`: another
    /// instance's ledger).
    private func start(autoAdvance: Bool = false, storageURL: String? = nil,
                       webhooks: WebhookReceiver? = nil) async throws -> GatewayE2E {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rollout-\(UUID().uuidString)")
        let storage = try TestStorage.fresh(in: directory, for: self)
        let gw = try await GatewayE2E.start(self) { options in
            options.webhookURL = webhooks?.url
            options.receiptRouting = "rollout"
            options.rolloutPlanXML = Self.plan(autoAdvance: autoAdvance)
            options.nonceRequired = false
            if let storageURL {
                options.storageURL = storageURL
            } else if case .postgres(let url, _, _) = storage.backend {
                options.storageURL = url
            }
        }
        webhooks?.expectSecret(gw.harness.webhookSecret)
        return gw
    }

    private func storageURL(of gw: GatewayE2E) -> String { gw.harness.options.storageURL ?? "sqlite:" + gw.sqlitePath }

    private func rollout(_ gw: GatewayE2E, _ action: RolloutAction = .status) async throws -> JSONValue {
        try await gw.harness.parts.rollout(bundleId: gw.bundleId, action: action)
    }

    /// Which adapter answers `account`'s new receipt now.
    private func answeringAdapter(_ gw: GatewayE2E, _ account: String, _ product: String = GatewayE2E.removeAds,
                                  file: StaticString = #filePath, line: UInt = #line) async throws -> String? {
        let purchase = try gw.buy(product, owner: "device-\(account)")
        let answer = try await gw.verifyReceipt(purchase.receiptBase64, account: account)
        XCTAssertEqual(answer.status, 200, answer.text, file: file, line: line)
        return answer.json["adapter"]?.stringValue
    }

    /// Waits past the routing's one-second reading of the ledger.
    private func afterAChangeIsRead() async throws { try await Task.sleep(for: .milliseconds(1_100)) }

    /// Polls the rollout status until `done` holds (bounded: 10 s).
    private func rolloutStatus(_ gw: GatewayE2E, file: StaticString = #filePath, line: UInt = #line,
                               until done: (JSONValue) -> Bool) async throws -> JSONValue {
        let deadline = Date().addingTimeInterval(10)
        var status = try await rollout(gw)
        while !done(status), Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
            status = try await rollout(gw)
        }
        XCTAssertTrue(done(status), "not reached within 10 s: \(status.jsonText)", file: file, line: line)
        return status
    }

    func testAnAdvanceByHandMovesTheCohortAndAnAccountStaysOnItsPathAsItGrows() async throws {
        let gw = try await start()
        let before = try await rollout(gw)
        XCTAssertEqual(before["percent"], .int(0))
        let insiderBefore = try await answeringAdapter(gw, Self.insider)
        XCTAssertEqual(insiderBefore, "verifyReceipt", "at 0 % everyone is answered as in shadow")

        let advanced = try await rollout(gw, .advance)
        XCTAssertEqual(advanced["percent"], .int(5), advanced.jsonText)
        XCTAssertEqual(advanced["events"]?.arrayValue?.first?["action"]?.stringValue, "advanced")
        XCTAssertEqual(advanced["events"]?.arrayValue?.first?["actor"]?.stringValue, "operator")
        try await afterAChangeIsRead()
        let insiderAt5 = try await answeringAdapter(gw, Self.insider, GatewayE2E.monthly)
        XCTAssertEqual(insiderAt5, "serverAPI", "a cohort account is answered by the Server API")
        let outsiderAt5 = try await answeringAdapter(gw, Self.outsider)
        XCTAssertEqual(outsiderAt5, "verifyReceipt")

        let again = try await rollout(gw, .advance)
        XCTAssertEqual(again["percent"], .int(50), again.jsonText)
        let metrics = try await gw.get("/metrics").text
        XCTAssertTrue(metrics.contains("iapgw_rollout_percent{app=\"\(gw.bundleId)\"} 50\n"), metrics)
        try await afterAChangeIsRead()
        let insiderAt50 = try await answeringAdapter(gw, Self.insider, GatewayE2E.monthly)
        XCTAssertEqual(insiderAt50, "serverAPI", "raising the percentage never moves a cohort account back")
        let outsiderAt50 = try await answeringAdapter(gw, Self.outsider, GatewayE2E.monthly)
        XCTAssertEqual(outsiderAt50, "verifyReceipt")

        // Both ways are compared: the cohort's with verifyReceipt beside it, the others' with the Server API.
        let comparisons = try await gw.send("GET", "\(gw.appURL)/comparisons")
        let accounts = Set(comparisons.json["comparisons"]?.arrayValue?.compactMap { $0["account"]?.stringValue } ?? [])
        XCTAssertTrue(accounts.isSuperset(of: [Self.insider, Self.outsider]), comparisons.text)
        let route = try await gw.send("GET", "\(gw.appURL)/rollout")
        XCTAssertEqual(route.status, 200, route.text)
        XCTAssertEqual(route.json["percent"], .int(50))
        XCTAssertEqual(route.json["stepVerdicts"]?.arrayValue?.map { $0["verdict"]?.stringValue }, ["held", "running"], route.text)
        let document = try await gw.get("/openapi.json")
        XCTAssertEqual(SchemaValidator(document: document.json).problems(route.json, component: "Rollout"), [],
                       "the answer is what the document declares: \(route.text)")
    }

    /// A planted disagreement on a cohort account trips the guard: the step is rolled back within
    /// its interval, with the purchase named, and every grant made before stays.
    func testAPlantedDisagreementRollsBackOnItsOwnAndKeepsEveryGrant() async throws {
        let webhooks = WebhookReceiver()
        try webhooks.start(self)
        let gw = try await start(webhooks: webhooks)
        _ = try await rollout(gw, .advance)
        try await afterAChangeIsRead()
        let granted = try gw.buy(GatewayE2E.monthly, owner: "device-\(Self.insider)")
        let first = try await gw.verifyReceipt(granted.receiptBase64, account: Self.insider)
        XCTAssertEqual(first.json["adapter"]?.stringValue, "serverAPI", first.text)
        XCTAssertEqual(first.json["newlyGranted"], .array([.string(granted.transactionId)]), first.text)

        let refunded = try gw.buy(GatewayE2E.removeAds, owner: "device-\(Self.insider)")
        try gw.simulator.plant(.refundOnlyIn(.serverAPI), transactionId: refunded.transactionId)
        let planted = try await gw.verifyReceipt(refunded.receiptBase64, account: Self.insider)
        XCTAssertEqual(planted.json["adapter"]?.stringValue, "serverAPI", planted.text)

        let rolledBack = try await rolloutStatus(gw) { $0["percent"] == .int(0) }
        let event = try XCTUnwrap(rolledBack["events"]?.arrayValue?.first)
        XCTAssertEqual(event["action"]?.stringValue, "rolledBack", rolledBack.jsonText)
        XCTAssertEqual(event["actor"]?.stringValue, "guard")
        XCTAssertEqual(event["fromPercent"], .int(5))
        XCTAssertEqual(event["purchases"], .array([.string(refunded.originalTransactionId)]), rolledBack.jsonText)
        XCTAssertTrue(event["reason"]?.stringValue?.contains("would lose access") == true, rolledBack.jsonText)
        XCTAssertEqual(rolledBack["paused"], .bool(true), "no automatic advance after a rollback")
        // The app backend hears of it: a signed rollout.rolledBack webhook naming the purchase.
        let deadline = Date().addingTimeInterval(10)
        while !webhooks.accepted.contains(where: { $0.kind == "rollout.rolledBack" }), Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let notice = try XCTUnwrap(webhooks.accepted.first { $0.kind == "rollout.rolledBack" }, "no rollout.rolledBack webhook")
        XCTAssertTrue(notice.signatureValid)
        XCTAssertEqual(notice.body["rollout"]?["fromPercent"], .int(5))
        XCTAssertEqual(notice.body["rollout"]?["toPercent"], .int(0))
        XCTAssertEqual(notice.body["rollout"]?["purchases"], .array([.string(refunded.originalTransactionId)]))
        let metrics = try await gw.get("/metrics").text
        XCTAssertTrue(metrics.contains("iapgw_rollout_percent{app=\"\(gw.bundleId)\"} 0\n"), metrics)
        XCTAssertTrue(metrics.contains("iapgw_rollout_rollbacks_total{app=\"\(gw.bundleId)\"} 1\n"), metrics)
        let page = try await gw.send("GET", "\(gw.harness.gatewayURL)/dashboard?app=\(gw.bundleId)")
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(page.text.contains("<strong id=\"rollout-percent\">0 %</strong>"), page.text)
        XCTAssertTrue(page.text.contains("<td>rolledBack: 5 % → 0 %</td><td>guard</td>"), "the timeline names the rollback")
        XCTAssertTrue(page.text.contains("<td class=\"id\">\(refunded.originalTransactionId)</td>"), "and the purchase")
        XCTAssertTrue(page.text.contains("<td>5 %</td>") && page.text.contains("<td>rolledBack</td>"), "the step's verdict")

        // The grant made under the Server API path stands; the account is answered by verifyReceipt again.
        let entitlements = try await gw.entitlements(Self.insider)
        let monthly = entitlements.first { $0["productId"]?.stringValue == GatewayE2E.monthly }
        XCTAssertEqual(monthly?["state"]?.stringValue, "active", "\(entitlements)")
        try await afterAChangeIsRead()
        let after = try await answeringAdapter(gw, Self.insider, GatewayE2E.monthly)
        XCTAssertEqual(after, "verifyReceipt")
    }

    func testTheGatewayAdvancesItselfOnceAStepsComparisonsAreMet() async throws {
        let gw = try await start(autoAdvance: true)
        // At 0 % the first step waits for its one compared chain (a shadow comparison).
        let first = try await answeringAdapter(gw, Self.outsider)
        XCTAssertEqual(first, "verifyReceipt")
        let advanced = try await rolloutStatus(gw) { $0["percent"] == .int(5) }
        XCTAssertEqual(advanced["events"]?.arrayValue?.first?["actor"]?.stringValue, "autoAdvance", advanced.jsonText)
        XCTAssertEqual(advanced["guard"]?["findings"], .array([.string("compared purchase chains: 0 of 1")]),
                       "the new step waits for comparisons of its own")
    }

    /// Two instances on one ledger route one account alike, within a second of a change; a
    /// restarted instance resumes the same step.
    func testTwoInstancesRouteAnAccountAlikeAndARestartResumesTheStep() async throws {
        let a = try await start()
        let b = try await start(storageURL: storageURL(of: a))
        _ = try await rollout(a, .advance)
        try await afterAChangeIsRead()
        let onA = try await answeringAdapter(a, Self.insider)
        let onB = try await answeringAdapter(b, Self.insider)
        XCTAssertEqual([onA, onB], ["serverAPI", "serverAPI"])
        let outsiderOnB = try await answeringAdapter(b, Self.outsider)
        XCTAssertEqual(outsiderOnB, "verifyReceipt")

        await b.harness.stop()
        let restarted = try await start(storageURL: storageURL(of: a))
        let status = try await rollout(restarted)
        XCTAssertEqual(status["percent"], .int(5), status.jsonText)
        let onRestarted = try await answeringAdapter(restarted, Self.insider, GatewayE2E.monthly)
        XCTAssertEqual(onRestarted, "serverAPI")
    }

    /// `iapgw rollout` drives the same ledger a running gateway routes by.
    func testTheCommandLineAdvancesPausesAndRollsBackWhatTheGatewayRoutesBy() async throws {
        // On PostgreSQL the command needs the deployment's receipt seal key, which the in-process
        // harness makes up for itself; the shared state itself is the same on both (the tests above).
        try XCTSkipIf(ProcessInfo.processInfo.environment["IAPGW_TEST_POSTGRES_URL"].map { !$0.isEmpty } == true,
                      "SQLite only: the command line on the harness's ledger file")
        let gw = try await start()
        func iapgw(_ action: String) throws -> JSONValue {
            let run = try ProcessRun.run(GatewayProcess.binary.path, [
                "rollout", action, "--app", gw.bundleId, "--config", gw.harness.directory.path,
                "--mappings", GatewayProcess.mappings.path])
            XCTAssertEqual(run.status, 0, run.stderr)
            return try StrictJSON().parse(Array(run.stdout.utf8))
        }
        XCTAssertEqual(try iapgw("advance")["percent"], .int(5))
        try await afterAChangeIsRead()
        let routed = try await answeringAdapter(gw, Self.insider)
        XCTAssertEqual(routed, "serverAPI", "the gateway follows the command's change")
        XCTAssertEqual(try iapgw("pause")["paused"], .bool(true))
        let rolledBack = try iapgw("rollback")
        XCTAssertEqual(rolledBack["percent"], .int(0))
        XCTAssertEqual(rolledBack["events"]?.arrayValue?.map { $0["action"]?.stringValue ?? "" }, ["rolledBack", "paused", "advanced"])
        let status = try iapgw("status")
        XCTAssertEqual(status["percent"], .int(0))
        let refused = try ProcessRun.run(GatewayProcess.binary.path, [
            "rollout", "rollback", "--app", gw.bundleId, "--config", gw.harness.directory.path,
            "--mappings", GatewayProcess.mappings.path])
        XCTAssertEqual(refused.status, 1, "nothing to roll back at 0 %")
        XCTAssertTrue(refused.stderr.contains("ROLLOUT_CONFLICT"), refused.stderr)
    }

    func testAnAppWithoutARolloutSaysSo() async throws {
        let gw = try await GatewayE2E.start(self) { $0.receiptRouting = "shadow" }
        let route = try await gw.send("GET", "\(gw.appURL)/rollout")
        XCTAssertEqual(route.status, 404, route.text)
        XCTAssertEqual(route.errorCode, "ROLLOUT_NOT_CONFIGURED")
    }
}
