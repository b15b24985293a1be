import Adapters
import Foundation
@testable import Gateway
@testable import IAPConfig
import IAPCore
import IAPMapping
import Ledger
import Synchronization
import XCTest

/// The migration router with stand-in adapters: which path answers, and that the secondary path
/// never holds the answer back.
final class MigrationRouterTests: XCTestCase {
    /// An adapter answering one transaction, failing, or waiting until released.
    final class StandInAdapter: VerificationAdapter, Sendable {
        enum Behaviour: Sendable { case answer, fail, waitForRelease }
        let id: AdapterID
        let behaviour: Behaviour
        private let release = Mutex<[CheckedContinuation<Void, Never>]>([])
        private let released = Mutex(false)
        let calls = Mutex(0)

        init(_ id: AdapterID, _ behaviour: Behaviour) { self.id = id; self.behaviour = behaviour }

        let evidenceForms: [EvidenceForm] = [.receipt, .transactionId, .signedTransaction]

        func verify(_ evidence: PurchaseEvidence, for app: AppPolicy, policy: any EvidencePolicy) async throws(VerificationError)
            -> AdapterOutcome {
            calls.withLock { $0 += 1 }
            switch behaviour {
            case .fail: throw VerificationError(.upstreamUnavailable, "stand-in refuses")
            case .waitForRelease:
                await withCheckedContinuation { continuation in
                    let now = released.withLock { $0 }
                    if now { continuation.resume() } else { release.withLock { $0.append(continuation) } }
                }
            case .answer: break
            }
            var t = CanonicalTransaction(transactionId: "1", productId: "pro", source: id.rawValue, mappingVersion: "\(id.rawValue)/v1")
            t.originalTransactionId = "1"
            return AdapterOutcome(adapter: id, environment: .production, transactions: [t], mappingVersion: "\(id.rawValue)/v1")
        }

        func releaseAll() {
            released.withLock { $0 = true }
            for c in release.withLock({ w in defer { w = [] }; return w }) { c.resume() }
        }
    }

    final class MemoryComparisons: ComparisonLedger, Sendable {
        let stored = Mutex<[PurchaseComparison]>([])
        func recordComparison(_ comparison: PurchaseComparison) throws(VerificationError) { stored.withLock { $0.append(comparison) } }
        func comparisons(_ query: ComparisonQuery) throws(VerificationError) -> [PurchaseComparison] { stored.withLock { $0 } }
        func comparisonCounts(bundleId: String, from: Int64?, to: Int64?) throws(VerificationError) -> ComparisonCounts {
            let all = stored.withLock { $0 }
            return ComparisonCounts(total: all.count, agreed: all.filter(\.agreed).count)
        }
    }

    private func app(_ mode: AppPolicy.RoutingMode, rate: Double = 0) -> AppPolicy {
        AppPolicy(bundleId: "com.example", allowedEnvironments: [.production], trustRoots: .init(jws: [], receipts: []),
                  productCatalog: [:], routing: .init(receipt: mode, transactionId: .serverAPI, signedTransaction: .serverAPI,
                                                      cutoverSampleRate: rate),
                  noncePolicy: .init(requiredForReceipts: false, ttlSeconds: 60), familySharingPolicy: .allow,
                  gracePeriodPolicy: .init(grantDuringGracePeriod: true, grantDuringBillingRetry: false),
                  onlineChecks: false, localOnlyJWS: false, apiKey: .sha256(String(repeating: "0", count: 64)))
    }

    private func router(_ store: MemoryComparisons, random: Double = 0.5) -> MigrationRouter {
        MigrationRouter(comparator: PurchaseComparator(knownDifferences: KnownDifferences()), store: store,
                        now: { 1_000 }, random: { random })
    }

    private let evidence = PurchaseEvidence.appReceipt(base64: "AAAA", nonce: nil)

    private func eventually(_ what: String, _ condition: () -> Bool) async throws {
        for _ in 0..<400 where !condition() { try await Task.sleep(for: .milliseconds(25)) }
        XCTAssertTrue(condition(), "timed out waiting until \(what)")
    }

    func testShadowAnswersWhileTheServerAPIPathIsStillHangingAndComparesOnceItEnds() async throws {
        let serverAPI = StandInAdapter(.serverAPI, .waitForRelease)
        let store = MemoryComparisons()
        let answer = try await router(store).run(evidence, account: "a", app: app(.shadow),
                                                 adapters: AdapterRegistry([StandInAdapter(.verifyReceipt, .answer), serverAPI]),
                                                 evidenceSHA256: "d")
        XCTAssertEqual(answer.answeringAdapter, .verifyReceipt)
        XCTAssertEqual(try answer.outcome.get().adapter, .verifyReceipt)
        XCTAssertEqual(store.stored.withLock { $0.count }, 0, "the comparison waits for the hanging path, the answer does not")
        serverAPI.releaseAll()
        try await eventually("the comparison is stored") { store.stored.withLock { $0.count } == 1 }
        XCTAssertEqual(store.stored.withLock { $0.first?.agreed }, true)
    }

    func testShadowFailureOfTheServerAPIPathLeavesTheAnswerAndRecordsTheCode() async throws {
        let store = MemoryComparisons()
        let answer = try await router(store).run(evidence, account: "a", app: app(.shadow),
                                                 adapters: AdapterRegistry([StandInAdapter(.verifyReceipt, .answer),
                                                                            StandInAdapter(.serverAPI, .fail)]),
                                                 evidenceSHA256: "d")
        XCTAssertEqual(try answer.outcome.get().transactions.map(\.transactionId), ["1"])
        try await eventually("the comparison is stored") { store.stored.withLock { $0.count } == 1 }
        XCTAssertEqual(store.stored.withLock { $0.first?.serverAPIError }, "UPSTREAM_UNAVAILABLE")
    }

    func testCutoverSpotChecksLegacyOnlyWhenTheSampleFallsBelowTheRate() async throws {
        for (rate, random, expectedLegacyCalls) in [(0.0, 0.0, 0), (0.5, 0.7, 0), (0.5, 0.2, 1), (1.0, 0.99, 1)] {
            let legacy = StandInAdapter(.verifyReceipt, .answer)
            let store = MemoryComparisons()
            let answer = try await router(store, random: random).run(
                evidence, account: "a", app: app(.cutover, rate: rate),
                adapters: AdapterRegistry([legacy, StandInAdapter(.serverAPI, .answer)]), evidenceSHA256: "d")
            XCTAssertEqual(answer.answeringAdapter, .serverAPI)
            if expectedLegacyCalls == 1 {
                try await eventually("the spot check is stored") { store.stored.withLock { $0.count } == 1 }
            }
            XCTAssertEqual(legacy.calls.withLock { $0 }, expectedLegacyCalls, "rate \(rate), sample \(random)")
            XCTAssertEqual(store.stored.withLock { $0.count }, expectedLegacyCalls)
        }
    }

    func testCompareRunsBothAndAnswersWithTheServerAPIAndTheComparison() async throws {
        let store = MemoryComparisons()
        let legacy = StandInAdapter(.verifyReceipt, .fail)
        let answer = try await router(store).run(evidence, account: "a", app: app(.compare),
                                                 adapters: AdapterRegistry([legacy, StandInAdapter(.serverAPI, .answer)]),
                                                 evidenceSHA256: "d")
        XCTAssertEqual(answer.answeringAdapter, .serverAPI)
        XCTAssertEqual(answer.comparison?.legacyError, "UPSTREAM_UNAVAILABLE")
        XCTAssertEqual(answer.comparison?.agreed, false)
        XCTAssertEqual(store.stored.withLock { $0.map(\.id) }, [answer.comparison!.id])
    }
}
