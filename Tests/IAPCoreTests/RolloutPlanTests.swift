import Foundation
import XCTest
@testable import IAPConfig
@testable import IAPCore

/// The rollout plan as the app file states it, and the cohort it routes by.
final class RolloutPlanTests: XCTestCase {
    private typealias S = ConfigTestSupport

    private func body(receipt: String, rollout: String?) -> String {
        S.validXMLBody.replacingOccurrences(
            of: "<routing><receipt>legacy</receipt>",
            with: "<routing>\(rollout.map { $0.isEmpty ? "<rollout type=\"dict\"/>" : "<rollout>\($0)</rollout>" } ?? "")<receipt>\(receipt)</receipt>")
    }

    private func decode(receipt: String = "rollout", _ rollout: String?) throws(VerificationError) -> AppPolicy {
        try S.decode(S.appXML(body: body(receipt: receipt, rollout: rollout)), .xml)
    }

    func testAPlanWithItsDefaultsRoutesOutsidersAsShadowAndTheCohortTheOtherWayRound() throws {
        let app = try decode("")
        let plan = try XCTUnwrap(app.routing.rollout)
        XCTAssertEqual(plan.steps.map(\.percent), [1, 5, 25, 50, 100])
        XCTAssertEqual(plan.steps.map(\.minimumDwellSeconds), Array(repeating: 3600, count: 5))
        XCTAssertFalse(plan.autoAdvance)
        XCTAssertEqual(plan.guardIntervalSeconds, 60)
        XCTAssertEqual(app.routing.receipt, .shadow, "accounts outside the cohort are answered as in shadow")
        XCTAssertEqual(plan.insideCohort.answering, .serverAPI)
        XCTAssertEqual(plan.insideCohort.generations?.from, .verifyReceipt, "the comparison's sides stay legacy and Server API")
        XCTAssertEqual(plan.insideCohort.generations?.to, .serverAPI)
        XCTAssertEqual(plan.agreement(app.readiness), app.readiness.agreementThreshold, "the guard defaults to the readiness threshold")
        XCTAssertEqual(plan.failureRate(app.readiness), 1 - app.readiness.agreementThreshold, accuracy: 1e-12)
    }

    func testStepsGiveTheirOwnDwellAndComparisonsOrThePlans() throws {
        let plan = try XCTUnwrap(try decode("""
            <steps type="array"><item type="integer">2</item>
              <item><percent type="integer">10</percent><minimumDwellSeconds type="integer">60</minimumDwellSeconds></item>
              <item type="integer">100</item></steps>
            <minimumDwellSeconds type="integer">5</minimumDwellSeconds>
            <minimumComparedChains type="integer">7</minimumComparedChains>
            <autoAdvance type="bool">true</autoAdvance><guardIntervalSeconds type="integer">10</guardIntervalSeconds>
            <agreementThreshold>0.9</agreementThreshold><maximumFailureRate>0.02</maximumFailureRate>
            """).routing.rollout)
        XCTAssertEqual(plan.steps, [.init(percent: 2, minimumDwellSeconds: 5, minimumComparedChains: 7),
                                    .init(percent: 10, minimumDwellSeconds: 60, minimumComparedChains: 7),
                                    .init(percent: 100, minimumDwellSeconds: 5, minimumComparedChains: 7)])
        XCTAssertTrue(plan.autoAdvance)
        XCTAssertEqual(plan.guardIntervalSeconds, 10)
        XCTAssertEqual(plan.agreementThreshold, 0.9)
        XCTAssertEqual(plan.maximumFailureRate, 0.02)
    }

    func testAPlanThatCannotRunIsRefusedWithWhereAndWhy() {
        let cases: [(String, String?, String)] = [
            ("rollout", nil, "needs a rollout plan"),
            ("shadow", "", "only a receipt routing of rollout takes a plan"),
            ("rollout", "<steps type=\"array\"><item type=\"integer\">5</item><item type=\"integer\">5</item></steps>", "must grow"),
            ("rollout", "<steps type=\"array\"/>", "at least one step"),
            ("rollout", "<steps type=\"array\"><item type=\"integer\">0</item></steps>", "routing.rollout.steps"),
            ("rollout", "<steps type=\"array\"><item type=\"integer\">101</item></steps>", "routing.rollout.steps"),
            ("rollout", "<guardIntervalSeconds type=\"integer\">61</guardIntervalSeconds>", "guardIntervalSeconds"),
            ("rollout", "<agreementThreshold>0</agreementThreshold>", "agreementThreshold"),
            ("rollout", "<maximumFailureRate>1.5</maximumFailureRate>", "maximumFailureRate"),
            ("rollout", "<from>serverAPI</from><to>serverAPI</to>", "another adapter"),
            ("rollout", "<colour>red</colour>", "colour"),
        ]
        for (receipt, rollout, expected) in cases {
            let error = S.refusal { () throws(VerificationError) in _ = try decode(receipt: receipt, rollout) }
            XCTAssertEqual(error?.code, .invalidConfiguration, "\(receipt) \(rollout ?? "-")")
            XCTAssertTrue(error?.message.contains(expected) == true, "\(error?.message ?? "no refusal") should say \(expected)")
        }
    }

    /// Raising the percentage only adds accounts, and the cohort is about the share it says.
    func testTheCohortIsStickyAsThePercentageGrowsAndAboutItsShare() {
        let accounts = (0..<4000).map { "user\($0)" }
        var previous = Set<String>()
        for percent in [0, 1, 5, 25, 50, 100] {
            let cohort = Set(accounts.filter { RolloutCohort.contains(percent: percent, bundleId: "com.test.app", account: $0) })
            XCTAssertTrue(previous.isSubset(of: cohort), "nobody leaves the cohort when it grows to \(percent) %")
            let share = Double(cohort.count) / Double(accounts.count) * 100
            XCTAssertEqual(share, Double(percent), accuracy: max(1.5, Double(percent) * 0.15), "\(percent) %")
            previous = cohort
        }
        XCTAssertEqual(previous.count, accounts.count)
        // Another app's cohort is another draw: the same account is not in every app's first 5 %.
        let here = accounts.filter { RolloutCohort.contains(percent: 5, bundleId: "com.test.app", account: $0) }
        let there = accounts.filter { RolloutCohort.contains(percent: 5, bundleId: "com.other.app", account: $0) }
        XCTAssertLessThan(Set(here).intersection(there).count, here.count / 2)
    }

    /// The point is a pure function of its inputs: every instance and release places an account alike.
    func testTheCohortPointIsFixedForAnAccount() {
        XCTAssertEqual(RolloutCohort.point(bundleId: "com.example.demo", account: "alice"),
                       RolloutCohort.point(bundleId: "com.example.demo", account: "alice"))
        XCTAssertNotEqual(RolloutCohort.point(bundleId: "com.example.demo", account: "alice"),
                          RolloutCohort.point(bundleId: "com.example.demo", account: "alicf"))
        // Pinned: a change of the hash would move accounts between paths in the middle of a rollout.
        XCTAssertEqual(RolloutCohort.point(bundleId: "com.example.demo", account: "alice"), Self.alicePoint)
    }

    static let alicePoint = 4121
}
