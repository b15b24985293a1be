import Foundation
@testable import Gateway
import IAPCore
import XCTest

/// Synthetic comparisons for the report: agreed ones and planted disagreements, on chosen days.
enum ReportFixtures {
    static let app = "com.example.demo"
    /// 2026-11-01T12:00:00Z.
    static let day1: Int64 = 1_793_534_400_000
    static let dayMillis: Int64 = 86_400_000

    static func agreed(_ n: Int, at time: Int64, prefix: String) -> [PurchaseComparison] {
        (0..<n).map { i in
            PurchaseComparison(id: "\(prefix)-\(i)", bundleId: app, comparedAt: time + Int64(i), evidenceKind: "receipt",
                               evidenceSHA256: String(repeating: "0", count: 64), legacyMappingVersion: "verifyReceipt/v1",
                               serverAPIMappingVersion: "serverAPI/v1", transactionCount: 1, differences: [],
                               productIds: ["com.example.demo.pro.monthly"])
        }
    }

    static func disagreeing(_ id: String, at time: Int64, _ differences: [ComparisonDifference]) -> PurchaseComparison {
        PurchaseComparison(id: id, bundleId: app, comparedAt: time, evidenceKind: "receipt",
                           evidenceSHA256: String(repeating: "1", count: 64), legacyMappingVersion: "verifyReceipt/v1",
                           serverAPIMappingVersion: "serverAPI/v1", transactionCount: 1, differences: differences,
                           productIds: ["com.example.demo.pro.monthly"])
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
        let comparisons = F.agreed(96, at: F.day1, prefix: "a") + F.agreed(46, at: F.day1 + F.dayMillis, prefix: "b") + F.planted
        let report = MigrationReport(bundleId: F.app, comparisons: comparisons)

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

    func testAnyUnexplainedDisagreementBlocksTheCutoverWhateverTheRate() {
        let comparisons = F.agreed(999, at: F.day1, prefix: "a") + [F.planted[0]]
        let report = MigrationReport(bundleId: F.app, comparisons: comparisons)

        XCTAssertEqual(report.overall.rate, 0.999)
        XCTAssertEqual(report.verdict, .notReady(reason: "1 comparison(s) with unexplained disagreements"))
    }

    func testTooFewComparisonsAreNotReadyEvenWhenAllAgree() {
        let report = MigrationReport(bundleId: F.app, comparisons: F.agreed(99, at: F.day1, prefix: "a"))

        XCTAssertEqual(report.verdict, .notReady(reason: "99 comparison(s); at least 100 are needed"))
    }

    func testEnoughAgreeingComparisonsAreReadyToCutOver() {
        let report = MigrationReport(bundleId: F.app, comparisons: F.agreed(100, at: F.day1, prefix: "a"))

        XCTAssertEqual(report.verdict, .ready)
        XCTAssertEqual(report.verdict.label, "ready to cut over")
    }

    func testPathFailuresLowerTheRateBelowTheConfiguredThreshold() {
        var comparisons = F.agreed(200, at: F.day1, prefix: "a")
        comparisons[0].serverAPIError = "UPSTREAM_UNAVAILABLE"
        comparisons[1].legacyError = "UPSTREAM_UNAVAILABLE"
        let strict = MigrationReport(bundleId: F.app, comparisons: comparisons)
        let lenient = MigrationReport(bundleId: F.app, comparisons: comparisons,
                                      criteria: ReadinessCriteria(agreementThreshold: 0.99, minimumComparisons: 200))

        XCTAssertEqual(strict.pathFailures, 2)
        XCTAssertEqual(strict.verdict, .notReady(reason: "agreement 99.0% is below the threshold 99.5%"))
        XCTAssertEqual(lenient.verdict, .ready)
    }

    func testComparisonsOfOtherAppsAreLeftOut() {
        var other = F.planted[0]
        other.bundleId = "com.example.other"
        let report = MigrationReport(bundleId: F.app, comparisons: F.agreed(3, at: F.day1, prefix: "a") + [other])

        XCTAssertEqual(report.overall, .init(total: 3, agreed: 3))
        XCTAssertTrue(report.rows.isEmpty)
    }

    func testHostileValuesAreRenderedAsText() {
        let hostile = F.disagreeing("x", at: F.day1, [
            ComparisonDifference(kind: .fieldMismatch, transactionId: "<img src=x onerror=alert(1)>",
                                 productId: "<script>alert('p')</script>", field: "\"><svg onload=alert(2)>",
                                 legacyValue: "\"a&b\"", serverAPIValue: "</td></tr></table><script>x()</script>"),
        ])
        let html = MigrationReportHTML.render(MigrationReport(bundleId: "<b>app</b>", comparisons: [hostile].map {
            var c = $0; c.bundleId = "<b>app</b>"; return c
        }))

        XCTAssertFalse(html.contains("<script"), "no script element, planted or otherwise")
        XCTAssertFalse(html.contains("<img"))
        XCTAssertFalse(html.contains("<svg onload"))
        XCTAssertFalse(html.contains("<b>app"))
        XCTAssertTrue(html.contains("&lt;script&gt;alert(&#39;p&#39;)&lt;/script&gt;"))
        XCTAssertTrue(html.contains("&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;&lt;script&gt;x()&lt;/script&gt;"))
        XCTAssertTrue(html.contains("&quot;a&amp;b&quot;"))
    }

    func testThePageLoadsNothingFromTheNetworkAndForbidsItByPolicy() {
        let html = MigrationReportHTML.render(MigrationReport(bundleId: F.app, comparisons: F.agreed(5, at: F.day1, prefix: "a") + F.planted))

        XCTAssertNil(html.range(of: "https?://", options: [.regularExpression, .caseInsensitive]))
        XCTAssertNil(html.range(of: "<script|<link|@import|url\\(", options: [.regularExpression, .caseInsensitive]))
        XCTAssertTrue(html.contains("content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\""))
        XCTAssertEqual(html.components(separatedBy: "<svg").count - 1, 3, "per day, by class, by field")
    }
}
