import Foundation
@testable import Gateway
@testable import IAPConfig
import IAPCore
import XCTest

/// Synthetic comparisons for the report: agreed ones and planted disagreements, on chosen days.
enum ReportFixtures {
    static let app = "com.example.demo"
    /// 2026-11-01T12:00:00Z.
    static let day1: Int64 = 1_793_534_400_000
    static let dayMillis: Int64 = 86_400_000
    static let monthly = "com.example.demo.pro.monthly"
    static let subscription = "Auto-Renewable Subscription"

    /// The demo app's readiness rule with the documented defaults, over a catalog of subscriptions only.
    static func criteria(_ change: (inout AppPolicy.Readiness) -> Void = { _ in }, types: Set<String> = [subscription],
                         primary: String = "Production") -> ReadinessCriteria {
        var t = AppPolicy.Readiness.standard
        change(&t)
        return ReadinessCriteria(thresholds: t, productTypes: types, primaryEnvironment: primary,
                                 gracePeriodPolicy: .init(grantDuringGracePeriod: true, grantDuringBillingRetry: false))
    }

    /// A chain both paths see active (agreed unless the comparison says otherwise).
    static func purchase(_ chain: String, agreed: Bool = true, type: String = subscription) -> ComparedPurchase {
        ComparedPurchase(originalTransactionId: chain, productId: monthly, productType: type, legacyState: .active,
                         legacyExpiresDate: day1 + 30 * dayMillis, serverAPIState: .active,
                         serverAPIExpiresDate: day1 + 30 * dayMillis, agreed: agreed)
    }

    /// `n` agreeing comparisons, each of its own chain and account, spread over `days` days from `time`.
    static func agreed(_ n: Int, at time: Int64, prefix: String, days: Int64 = 7, environment: String = "Production")
        -> [PurchaseComparison] {
        (0..<n).map { i in
            var c = PurchaseComparison(id: "\(prefix)-\(i)", bundleId: app, comparedAt: time + Int64(i) * days * dayMillis / Int64(max(n - 1, 1)),
                                       evidenceKind: "receipt", evidenceSHA256: "\(prefix)-\(i)", legacyMappingVersion: "verifyReceipt/v1",
                                       serverAPIMappingVersion: "serverAPI/v1", transactionCount: 1, differences: [],
                                       productIds: [monthly])
            c.account = "\(prefix)-account-\(i)"
            c.environment = environment
            c.purchases = [purchase("\(prefix)-chain-\(i)")]
            return c
        }
    }

    static func disagreeing(_ id: String, at time: Int64, _ differences: [ComparisonDifference]) -> PurchaseComparison {
        var c = PurchaseComparison(id: id, bundleId: app, comparedAt: time, evidenceKind: "receipt",
                                   evidenceSHA256: id, legacyMappingVersion: "verifyReceipt/v1",
                                   serverAPIMappingVersion: "serverAPI/v1", transactionCount: 1, differences: differences,
                                   productIds: [monthly])
        c.account = "account-\(id)"
        c.environment = "Production"
        c.purchases = differences.map { d in
            var p = purchase(d.transactionId, agreed: false)
            if d.kind == .onlyInLegacy { p.serverAPIState = nil; p.serverAPIExpiresDate = nil }
            if d.kind == .entitlementMismatch { p.serverAPIState = .refunded }
            return p
        }
        return c
    }

    /// One of each kind the simulator can plant: refund in one path only, another expiry, another
    /// product, a transaction present in one path only.
    static let planted: [PurchaseComparison] = [
        disagreeing("refund", at: day1 + dayMillis + 10, [
            ComparisonDifference(kind: .entitlementMismatch, transactionId: "2000000000000101", productId: "com.example.demo.pro.monthly",
                                 field: "revocationDate", legacyValue: nil, serverAPIValue: "1793620000000"),
        ]),
        disagreeing("expiry", at: day1 + dayMillis + 20, [
            ComparisonDifference(kind: .expiryMismatch, transactionId: "2000000000000102", productId: "com.example.demo.pro.monthly",
                                 field: "expiresDate", legacyValue: "1796000000000", serverAPIValue: "1796086400000"),
        ]),
        disagreeing("product", at: day1 + dayMillis + 30, [
            ComparisonDifference(kind: .fieldMismatch, transactionId: "2000000000000103", productId: "com.example.demo.pro.monthly",
                                 field: "productId", legacyValue: "\"com.example.demo.pro.monthly\"",
                                 serverAPIValue: "\"com.example.demo.removeads\""),
        ]),
        disagreeing("missing", at: day1 + dayMillis + 40, [
            ComparisonDifference(kind: .onlyInLegacy, transactionId: "2000000000000104", productId: "com.example.demo.removeads",
                                 field: nil, legacyValue: "{\"transactionId\":\"2000000000000104\"}", serverAPIValue: nil),
        ]),
    ]
}

final class ReportModelTests: XCTestCase {
    private typealias F = ReportFixtures

    func testRatesPerDayPerFieldAndByClassCountThePlantedDisagreements() {
        let comparisons = F.agreed(96, at: F.day1, prefix: "a", days: 0) + F.agreed(46, at: F.day1 + F.dayMillis, prefix: "b", days: 0)
            + F.planted
        let report = MigrationReport(bundleId: F.app, comparisons: comparisons, criteria: F.criteria())

        XCTAssertEqual(report.overall, .init(total: 146, agreed: 142))
        XCTAssertEqual(report.disagreements, 4)
        XCTAssertEqual(report.pathFailures, 0)
        XCTAssertEqual(report.perDay.map(\.day), ["2026-11-01", "2026-11-02"])
        XCTAssertEqual(report.perDay.map(\.rate), [.init(total: 96, agreed: 96), .init(total: 50, agreed: 46)])
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: report.differencesByClass.map { ($0.kind, $0.count) }),
                       [.onlyInLegacy: 1, .onlyInServerAPI: 0, .fieldMismatch: 1, .entitlementMismatch: 1, .expiryMismatch: 1])
        XCTAssertEqual(Set(report.differencesByField.map(\.field)),
                       ["revocationDate", "expiresDate", "productId", MigrationReport.wholeTransaction])
        XCTAssertEqual(report.perField.first { $0.field == "expiresDate" }?.rate, .init(total: 146, agreed: 145))
        XCTAssertEqual(Set(report.rows.map(\.transactionId)),
                       ["2000000000000101", "2000000000000102", "2000000000000103", "2000000000000104"])
        let product = report.rows.first { $0.field == "productId" }
        XCTAssertEqual(product?.legacyValue, "\"com.example.demo.pro.monthly\"")
        XCTAssertEqual(product?.serverAPIValue, "\"com.example.demo.removeads\"")
    }

    func testEnoughDistinctAgreeingPurchasesOverTheWindowAreReadyToCutOver() {
        let report = MigrationReport(bundleId: F.app, comparisons: F.agreed(100, at: F.day1, prefix: "a"), criteria: F.criteria())

        XCTAssertEqual(report.verdict, .ready, "\(report.primary.criteria)")
        XCTAssertEqual(report.verdict.label, "ready to cut over")
        XCTAssertEqual(report.primary.chains, 100)
        XCTAssertEqual(report.primary.accounts, 100)
    }

    func testAHundredComparisonsOfOneReceiptAreOnePurchaseAndNotReady() {
        let one = F.agreed(1, at: F.day1, prefix: "same")[0]
        let repeated = (0..<100).map { i -> PurchaseComparison in
            var c = one
            c.id = "again-\(i)"
            c.comparedAt = F.day1 + Int64(i) * F.dayMillis / 10
            return c
        }
        let report = MigrationReport(bundleId: F.app, comparisons: repeated, criteria: F.criteria())

        XCTAssertEqual(report.overall.total, 100)
        XCTAssertEqual(report.primary.chains, 1, "the latest comparison of each chain counts once")
        XCTAssertEqual(report.verdict, .notReady(reasons: [
            "1 purchase chain(s) compared (at least 100)", "1 account(s) (at least 20)",
        ]))
    }

    func testOneUnexplainedPathFailureBlocksTheCutoverAndAPolicyMayExplainItsCode() {
        var comparisons = F.agreed(200, at: F.day1, prefix: "a")
        comparisons[7].serverAPIError = "UPSTREAM_UNAVAILABLE"
        let strict = MigrationReport(bundleId: F.app, comparisons: comparisons, criteria: F.criteria())
        let explained = MigrationReport(bundleId: F.app, comparisons: comparisons, criteria: F.criteria {
            $0.explainedFailures = ["UPSTREAM_UNAVAILABLE": "Apple's sandbox outage of 2 Nov, retried"]
        })

        XCTAssertEqual(strict.pathFailures, 1)
        XCTAssertEqual(strict.verdict, .notReady(reasons: ["1 unexplained path failure(s) (none allowed)"]))
        XCTAssertEqual(explained.verdict, .ready, "199/200 = 99.5% and the one failure explained: \(explained.primary.criteria)")
        XCTAssertEqual(explained.failures.first?.explanation, "Apple's sandbox outage of 2 Nov, retried")
        XCTAssertEqual(explained.failures.first?.sampleTransactionId, "a-chain-7")
        XCTAssertEqual(explained.failures.first?.sampleAccount, "a-account-7")
        XCTAssertEqual(explained.failures.first?.path, "serverAPI")
    }

    func testEveryUnmetCriterionIsListedWithItsNumbers() {
        let comparisons = F.agreed(9, at: F.day1, prefix: "a", days: 1).map { c -> PurchaseComparison in
            var c = c; c.account = "one-account"; return c
        } + [F.planted[0]]
        let report = MigrationReport(bundleId: F.app, comparisons: comparisons,
                                     criteria: F.criteria(types: [F.subscription, "Consumable"]))

        guard case .notReady(let reasons) = report.verdict else { return XCTFail("\(report.verdict)") }
        XCTAssertEqual(reasons, [
            "10 purchase chain(s) compared (at least 100)",
            "2 account(s) (at least 20)",
            "observed over 1.0 day(s) (at least 7)",
            "product type(s) not compared yet: Consumable",
            "agreement 90.0% of 10 purchase chain(s) (at least 99.5%)",
            "1 purchase chain(s) with unexplained disagreements (none allowed)",
            "1 account(s) would lose access at cutover (none allowed)",
        ])
    }

    func testTheLatestComparisonOfAChainDecidesIt() {
        var comparisons = F.agreed(100, at: F.day1, prefix: "a")
        var earlier = F.disagreeing("earlier", at: F.day1 - 1, [ComparisonDifference(
            kind: .expiryMismatch, transactionId: "a-chain-3", productId: F.monthly, field: "expiresDate",
            legacyValue: "1", serverAPIValue: "2")])
        earlier.account = "a-account-3"
        comparisons.append(earlier)
        let report = MigrationReport(bundleId: F.app, comparisons: comparisons, criteria: F.criteria())

        XCTAssertEqual(report.disagreements, 1, "the comparison itself is still shown")
        XCTAssertEqual(report.verdict, .ready, "a later agreeing comparison of the chain supersedes it")
    }

    func testProductionIsJudgedApartFromSandbox() {
        let sandbox = F.agreed(150, at: F.day1, prefix: "s", environment: "Sandbox")
        let production = F.agreed(30, at: F.day1, prefix: "p")
        let report = MigrationReport(bundleId: F.app, comparisons: sandbox + production, criteria: F.criteria())

        XCTAssertEqual(report.environments.map(\.environment), ["Production", "Sandbox"])
        XCTAssertEqual(report.environments.map(\.chains), [30, 150])
        XCTAssertTrue(report.environments[1].isReady)
        XCTAssertEqual(report.verdict, .notReady(reasons: ["30 purchase chain(s) compared (at least 100)"]),
                       "Sandbox purchases never make Production ready")
    }

    func testEvidenceRefusedByBothPathsIsCountedApartAndNeverInAgreement() {
        let junk = (0..<500).map { i -> PurchaseComparison in
            var c = PurchaseComparison(id: "junk-\(i)", bundleId: F.app, comparedAt: F.day1 + Int64(i), evidenceKind: "receipt",
                                       evidenceSHA256: "junk-\(i)", legacyMappingVersion: "verifyReceipt/v1",
                                       serverAPIMappingVersion: "serverAPI/v1", transactionCount: 0, differences: [],
                                       legacyError: "RECEIPT_NOT_AUTHENTIC", serverAPIError: "MALFORMED_RECEIPT")
            c.account = "attacker"
            return c
        }
        let report = MigrationReport(bundleId: F.app, comparisons: F.agreed(100, at: F.day1, prefix: "a") + junk,
                                     criteria: F.criteria())

        XCTAssertEqual(report.refusedByBoth, 500)
        XCTAssertEqual(report.refusedByBothByCodes.first?.codes, "RECEIPT_NOT_AUTHENTIC / MALFORMED_RECEIPT")
        XCTAssertEqual(report.overall, .init(total: 100, agreed: 100))
        XCTAssertEqual(report.pathFailures, 0)
        XCTAssertEqual(report.unattributedFailures, 0)
        XCTAssertEqual(report.verdict, .ready)
    }

    func testAFailureOfBothPathsThatIsNotJunkBlocksEveryEnvironmentUntilTheEvidenceIsComparedAgain() {
        var failed = PurchaseComparison(id: "down", bundleId: F.app, comparedAt: F.day1, evidenceKind: "receipt",
                                        evidenceSHA256: "a-5", legacyMappingVersion: "verifyReceipt/v1",
                                        serverAPIMappingVersion: "serverAPI/v1", transactionCount: 0, differences: [],
                                        legacyError: "UPSTREAM_UNAVAILABLE", serverAPIError: "UPSTREAM_UNAVAILABLE")
        failed.account = "a-account-5"
        let agreed = F.agreed(100, at: F.day1 + 1, prefix: "a")
        let blocked = MigrationReport(bundleId: F.app, comparisons: agreed.filter { $0.id != "a-5" } + [failed],
                                      criteria: F.criteria { $0.minimumPurchaseChains = 99 })
        let retried = MigrationReport(bundleId: F.app, comparisons: agreed + [failed], criteria: F.criteria())

        XCTAssertEqual(blocked.unattributedFailures, 1)
        XCTAssertEqual(blocked.verdict, .notReady(reasons: ["1 unexplained path failure(s) (none allowed)"]))
        XCTAssertEqual(retried.unattributedFailures, 0, "the same evidence compared later supersedes the failure")
        XCTAssertEqual(retried.verdict, .ready)
    }

    func testCutoverImpactListsWhoWouldLoseGainOrSeeAnotherExpiry() {
        var gain = F.disagreeing("gain", at: F.day1 + 5, [ComparisonDifference(
            kind: .entitlementMismatch, transactionId: "chain-gain", productId: F.monthly, field: "entitlementState",
            legacyValue: "\"refunded\"", serverAPIValue: "\"active\"")])
        gain.purchases[0].legacyState = .refunded
        gain.purchases[0].serverAPIState = .active
        var later = F.disagreeing("later", at: F.day1 + 6, [ComparisonDifference(
            kind: .expiryMismatch, transactionId: "chain-later", productId: F.monthly, field: "expiresDate",
            legacyValue: "1", serverAPIValue: "2")])
        later.purchases[0].serverAPIExpiresDate = F.day1 + 31 * F.dayMillis
        let report = MigrationReport(bundleId: F.app, comparisons: F.agreed(100, at: F.day1, prefix: "a")
                                     + [F.planted[3], gain, later], criteria: F.criteria())

        XCTAssertEqual(report.impact.map { "\($0.change.rawValue) \($0.account ?? "-") \($0.originalTransactionId)" }, [
            "losesAccess account-missing 2000000000000104",
            "gainsAccess account-gain chain-gain",
            "differentExpiry account-later chain-later",
        ])
        XCTAssertEqual(report.impact[0].legacyState, .active)
        XCTAssertNil(report.impact[0].serverAPIState)
        XCTAssertEqual(report.impact.map { "\($0.legacyStateName) -> \($0.serverAPIStateName)" },
                       ["active -> notFound", "refunded -> active", "active -> active"])
        XCTAssertTrue(report.verdictText.contains("losesAccess: account account-missing, \(F.monthly), active"), report.verdictText)
        XCTAssertTrue(report.verdictText.contains("-> notFound\n"), report.verdictText)
        guard case .notReady(let reasons) = report.verdict else { return XCTFail("a cutover that loses access is never ready") }
        XCTAssertTrue(reasons.contains("1 account(s) would lose access at cutover (none allowed)"), "\(reasons)")
    }

    func testComparisonsOfOtherAppsAreLeftOut() {
        var other = F.planted[0]
        other.bundleId = "com.example.other"
        let report = MigrationReport(bundleId: F.app, comparisons: F.agreed(3, at: F.day1, prefix: "a") + [other],
                                     criteria: F.criteria())

        XCTAssertEqual(report.overall, .init(total: 3, agreed: 3))
        XCTAssertTrue(report.rows.isEmpty)
    }

    func testHostileValuesAreRenderedAsText() {
        var hostile = F.disagreeing("x", at: F.day1, [
            ComparisonDifference(kind: .fieldMismatch, transactionId: "<img src=x onerror=alert(1)>",
                                 productId: "<script>alert('p')</script>", field: "\"><svg onload=alert(2)>",
                                 legacyValue: "\"a&b\"", serverAPIValue: "</td></tr></table><script>x()</script>"),
        ])
        hostile.bundleId = "<b>app</b>"
        hostile.account = "<script>acct()</script>"
        hostile.serverAPIError = "<script>code()</script>"
        let html = MigrationReportHTML.render(MigrationReport(bundleId: "<b>app</b>", comparisons: [hostile], criteria: F.criteria()))

        XCTAssertFalse(html.contains("<script"), "no script element, planted or otherwise")
        XCTAssertFalse(html.contains("<img"))
        XCTAssertFalse(html.contains("<svg onload"))
        XCTAssertFalse(html.contains("<b>app"))
        XCTAssertTrue(html.contains("&lt;script&gt;alert(&#39;p&#39;)&lt;/script&gt;"))
        XCTAssertTrue(html.contains("&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;&lt;script&gt;x()&lt;/script&gt;"))
        XCTAssertTrue(html.contains("&quot;a&amp;b&quot;"))
        XCTAssertTrue(html.contains("&lt;script&gt;acct()&lt;/script&gt;"))
    }

    func testThePageLoadsNothingFromTheNetworkAndForbidsItByPolicy() {
        let html = MigrationReportHTML.render(MigrationReport(bundleId: F.app, comparisons: F.agreed(5, at: F.day1, prefix: "a") + F.planted,
                                                              criteria: F.criteria()))

        XCTAssertNil(html.range(of: "https?://", options: [.regularExpression, .caseInsensitive]))
        XCTAssertNil(html.range(of: "<script|<link|@import|url\\(", options: [.regularExpression, .caseInsensitive]))
        XCTAssertTrue(html.contains("content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\""))
        XCTAssertEqual(html.components(separatedBy: "<svg").count - 1, 3, "per day, by class, by field")
    }

    func testAProductMismatchIsOneFindingWithTheRenewalFieldsItCausedAttached() {
        let legacy = "\"com.example.demo.pro.monthly\"", server = "\"com.example.demo.pro.yearly\""
        let product = F.disagreeing("product", at: F.day1, [
            ComparisonDifference(kind: .fieldMismatch, transactionId: "2000000000000201", productId: F.monthly,
                                 field: "productId", legacyValue: legacy, serverAPIValue: server),
            ComparisonDifference(kind: .fieldMismatch, transactionId: "2000000000000200", productId: F.monthly,
                                 field: "renewal.autoRenewProductId", legacyValue: legacy, serverAPIValue: server),
            ComparisonDifference(kind: .fieldMismatch, transactionId: "2000000000000200", productId: F.monthly,
                                 field: "renewal.productId", legacyValue: legacy, serverAPIValue: server),
            // Another cause in the same comparison stays its own finding.
            ComparisonDifference(kind: .fieldMismatch, transactionId: "2000000000000200", productId: F.monthly,
                                 field: "renewal.autoRenewStatus", legacyValue: "1", serverAPIValue: "0"),
        ])
        let report = MigrationReport(bundleId: F.app, comparisons: [product], criteria: F.criteria())

        XCTAssertEqual(report.rows.map { $0.field ?? "-" }, ["productId", "renewal.autoRenewStatus"], "one cause, one finding")
        XCTAssertEqual(report.rows.first?.related.compactMap(\.field), ["renewal.autoRenewProductId", "renewal.productId"])
        XCTAssertEqual(report.differencesByClass.first { $0.kind == .fieldMismatch }?.count, 2, "the class chart counts findings")
        XCTAssertEqual(Set(report.differencesByField.map(\.field)), ["productId", "renewal.autoRenewStatus"])
        let html = MigrationReportHTML.render(report)
        XCTAssertTrue(html.contains("Findings by class (one per cause)"), "the chart says what it counts")
        XCTAssertTrue(html.contains("related: renewal.autoRenewProductId, renewal.productId"))
    }

    func testThePageShowsDatesAsUTCAndARecordOnOneSideAsAFieldTableWithIdsKeptWhole() {
        let html = MigrationReportHTML.render(MigrationReport(bundleId: F.app, comparisons: F.planted, criteria: F.criteria()))

        XCTAssertTrue(html.contains("<time title=\"1796000000000\">2026-11-30T00:53:20.000Z</time> <span class=\"ms\">1796000000000</span>"),
                      "an expiry as a UTC date, the milliseconds beside it where the sides differ")
        XCTAssertFalse(html.contains("<td class=\"value legacy\">1796000000000"), "never a bare millisecond count")
        XCTAssertTrue(html.contains("<table class=\"record\"><tr><th>transactionId</th><td class=\"id\">&quot;2000000000000104&quot;</td></tr></table>"),
                      "a record found on one side only is a field table, not raw JSON")
        XCTAssertTrue(html.contains("<td class=\"id\">2000000000000101</td>"), "ids sit in cells that never wrap")
        XCTAssertTrue(html.contains(".id,.code{font-family:monospace;white-space:nowrap}time{white-space:nowrap}"), "ids and dates never wrap")
    }

    func testBreakdownsPerProductEnvironmentAndAppVersion() {
        var comparisons = F.agreed(3, at: F.day1, prefix: "a") + F.agreed(2, at: F.day1, prefix: "s", environment: "Sandbox")
        comparisons[0].appVersion = "1.0"
        comparisons[1].appVersion = "2.0"
        comparisons[2].appVersion = "2.0"
        comparisons[2].productIds = [F.monthly, "com.example.demo.removeads"]
        comparisons[2].serverAPIError = "UPSTREAM_UNAVAILABLE"
        let report = MigrationReport(bundleId: F.app, comparisons: comparisons + [F.planted[1]], criteria: F.criteria())

        XCTAssertEqual(report.breakdowns.map { "\($0.dimension) \($0.value) \($0.comparisons)/\($0.agreed)/\($0.withFindings)/\($0.failed)" }, [
            "product com.example.demo.pro.monthly 6/4/1/1", "product com.example.demo.removeads 1/0/0/1",
            "environment Production 4/2/1/1", "environment Sandbox 2/2/0/0",
            "appVersion 1.0 1/1/0/0", "appVersion 2.0 2/1/0/1",
        ])
        XCTAssertTrue(MigrationReportHTML.render(report).contains("<table id=\"breakdowns\">"))
    }

    func testCSVHasOneRowPerFindingAndPerFailedPathAndDefusesFormulas() {
        var failed = F.agreed(1, at: F.day1, prefix: "f")[0]
        failed.serverAPIError = "UPSTREAM_UNAVAILABLE"
        failed.account = "=HYPERLINK(\"x\")"
        let csv = MigrationReportCSV.render(MigrationReport(bundleId: F.app, comparisons: F.planted + [failed], criteria: F.criteria()))
        let lines = csv.components(separatedBy: "\r\n").filter { !$0.isEmpty }

        XCTAssertEqual(lines.count, 1 + 4 + 1 + 2, "header, four findings, one failed path, two purchases a cutover changes")
        let impact = lines.filter { $0.hasPrefix("\"impact\"") }
        XCTAssertEqual(impact.count, 2, "\(lines)")
        XCTAssertTrue(impact.contains { $0.contains("\"losesAccess\",\"\",\"\",\"active until ") && $0.hasSuffix(",\"notFound\",\"\"") },
                      "the state the Server API lacks is named: \(impact)")
        XCTAssertEqual(lines[0], MigrationReportCSV.header.map { "\"\($0)\"" }.joined(separator: ","))
        XCTAssertTrue(lines.contains { $0.hasPrefix("\"disagreement\",\"expiry\",\"2026-11-02T12:00:00.020Z\"") && $0.contains("\"2026-11-30T00:53:20.000Z\"") },
                      "dates as UTC ISO-8601: \(lines)")
        XCTAssertTrue(lines.contains { $0.contains("\"\"\"com.example.demo.pro.monthly\"\"\"") }, "quotes doubled")
        let failure = try? XCTUnwrap(lines.first { $0.hasPrefix("\"failure\"") })
        XCTAssertTrue(failure?.contains("\"'=HYPERLINK(\"\"x\"\")\"") == true, failure ?? "")
        XCTAssertTrue(failure?.contains("\"UPSTREAM_UNAVAILABLE\",\"\",\"serverAPI\"") == true, failure ?? "")
    }
}
