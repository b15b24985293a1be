import Foundation
import XCTest
@testable import Adapters
import AppReceipts
import AppleTrust
import HTTPServer
@testable import IAPConfig
import IAPCore
import TestPKI

final class ServerAPIAdapterTests: XCTestCase {
    private var fx: ServerAPIFixture!

    override func setUp() async throws { fx = try ServerAPIFixture() }
    override func tearDown() async throws { await fx.tearDown() }

    private func scriptInfo(_ environment: ServerAPIEnvironment, _ id: String, _ payload: JSONValue) throws {
        fx.server.script("GET", environment, "/inApps/v1/transactions/\(id)",
                         ScriptedAppStoreServer.ok(["signedTransactionInfo": .string(try fx.sign(payload))]))
    }

    private func verify(_ evidence: PurchaseEvidence, account: String = "acct-1", app: AppPolicy? = nil,
                        adapter: ServerAPIAdapter? = nil) async throws(VerificationError) -> AdapterOutcome {
        let adapter = try! adapter ?? fx.adapter()
        return try await adapter.verify(evidence, account: account, for: app ?? fx.app())
    }

    func testTransactionIdIsLookedUpVerifiedAndNormalised() async throws {
        try scriptInfo(.production, "1001", ServerAPIFixture.transaction("1001"))
        let outcome = try await verify(.transactionId("1001"))
        XCTAssertEqual(outcome.adapter, .serverAPI)
        XCTAssertEqual(outcome.environment, .production)
        XCTAssertEqual(outcome.mappingVersion, "serverAPI/v1")
        XCTAssertEqual(outcome.transactions.count, 1)
        let t = try XCTUnwrap(outcome.transactions.first)
        XCTAssertEqual(t.transactionId, "1001")
        XCTAssertEqual(t.productId, "com.example.pro")
        XCTAssertEqual(t.type, .nonConsumable)
        XCTAssertEqual(t.price, 9990)
        XCTAssertEqual(t.source, "serverAPI")
        XCTAssertEqual(outcome.renewals, [])
        XCTAssertEqual(fx.server.requests.count, 1, "no status lookup for a non-subscription")
    }

    func testAutoRenewableTransactionIdAddsTheChainsLatestTransactionAndRenewalInfo() async throws {
        let sub = "Auto-Renewable Subscription"
        try scriptInfo(.production, "1100", ServerAPIFixture.transaction("1100", type: sub))
        let latest = ServerAPIFixture.transaction("1102", original: "1100", type: sub, purchaseDate: ServerAPIFixture.nowMs - 1000)
        let otherChain = ServerAPIFixture.transaction("1200", type: sub)
        fx.server.script("GET", .production, "/inApps/v1/subscriptions/1100", ScriptedAppStoreServer.ok([
            "environment": .string("Production"),
            "data": .array([.object(["subscriptionGroupIdentifier": .string("21000000"), "lastTransactions": .array([
                .object(["status": .int(1), "originalTransactionId": .string("1100"),
                         "signedTransactionInfo": .string(try fx.sign(latest)),
                         "signedRenewalInfo": .string(try fx.sign(ServerAPIFixture.renewal(original: "1100")))]),
                .object(["status": .int(2), "originalTransactionId": .string("1200"),
                         "signedTransactionInfo": .string(try fx.sign(otherChain)),
                         "signedRenewalInfo": .string(try fx.sign(ServerAPIFixture.renewal(original: "1200")))]),
            ])])]),
        ]))
        let outcome = try await verify(.transactionId("1100"))
        XCTAssertEqual(outcome.transactions.map(\.transactionId), ["1100", "1102"])
        XCTAssertEqual(outcome.renewals.map(\.originalTransactionId), ["1100"])
        XCTAssertEqual(outcome.renewals.first?.autoRenewStatus, .on)
    }

    func testSignedTransactionIsTrustedLocallyWhenTheAppSaysLocalOnly() async throws {
        let jws = try fx.sign(ServerAPIFixture.transaction("1300"))
        let outcome = try await verify(.signedTransaction(jws), app: fx.app(localOnlyJWS: true))
        XCTAssertEqual(outcome.transactions.map(\.transactionId), ["1300"])
        XCTAssertNil(outcome.transactions.first?.revocationDate)
        XCTAssertEqual(fx.server.requests.count, 0)
    }

    func testSignedTransactionIsConfirmedAndAppleAnswerShowingARefundWins() async throws {
        let jws = try fx.sign(ServerAPIFixture.transaction("1400"))
        let refundedAt = ServerAPIFixture.nowMs - 500
        try scriptInfo(.production, "1400", ServerAPIFixture.transaction("1400", revocationDate: refundedAt))
        let outcome = try await verify(.signedTransaction(jws))
        XCTAssertEqual(outcome.transactions.count, 1)
        XCTAssertEqual(outcome.transactions.first?.revocationDate, refundedAt)
        XCTAssertEqual(outcome.transactions.first?.revocationReason, RevocationReason(rawValue: 1))
        XCTAssertEqual(fx.server.requests.map(\.path), ["/production/inApps/v1/transactions/1400"])
    }

    func testSandboxFallbackOnlyForAnAccountAllowedSandbox() async throws {
        let app = fx.app(environments: [.production], sandboxAccounts: ["reviewer"])
        fx.server.script("GET", .production, "/inApps/v1/transactions/1500", ScriptedAppStoreServer.appleError(404, 4040010))
        try scriptInfo(.sandbox, "1500", ServerAPIFixture.transaction("1500", environment: "Sandbox"))
        let adapter = try fx.adapter()

        let reviewer = try await verify(.transactionId("1500"), account: "reviewer", app: app, adapter: adapter)
        XCTAssertEqual(reviewer.environment, .sandbox)

        let before = fx.server.requests.count
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await adapter.verify(.transactionId("1500"), account: "customer", for: app)
        }
        XCTAssertEqual(error?.code, .transactionNotFound)
        XCTAssertEqual(fx.server.requests.dropFirst(before).map(\.path), ["/production/inApps/v1/transactions/1500"])
    }

    func testSandboxSignedTransactionFromAnOrdinaryAccountOfAProductionAppIsRefused() async throws {
        let jws = try fx.sign(ServerAPIFixture.transaction("1600", environment: "Sandbox"))
        let app = fx.app(environments: [.production], sandboxAccounts: ["reviewer"], localOnlyJWS: true)
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verify(.signedTransaction(jws), account: "customer", app: app)
        }
        XCTAssertEqual(error?.code, .environmentNotAllowed)
        let reviewer = try await verify(.signedTransaction(jws), account: "reviewer", app: app)
        XCTAssertEqual(reviewer.environment, .sandbox)
    }

    func testATransactionSignedByAnotherPKIIsRefusedAsUntrustedRoot() async throws {
        let forger = try TestPKI.CertificateAuthority.make()
        let forged = try forger.signer(leaf: try forger.issueLeaf()).sign(ServerAPIFixture.transaction("1700"))
        fx.server.script("GET", .production, "/inApps/v1/transactions/1700",
                         ScriptedAppStoreServer.ok(["signedTransactionInfo": .string(forged)]))
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verify(.transactionId("1700"))
        }
        XCTAssertEqual(error?.code, .untrustedRoot)
    }

    func testAProductionHostAnsweringWithASandboxTransactionIsRefused() async throws {
        try scriptInfo(.production, "1750", ServerAPIFixture.transaction("1750", environment: "Sandbox"))
        let app = fx.app(environments: [.production, .sandbox])
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verify(.transactionId("1750"), app: app)
        }
        XCTAssertEqual(error?.code, .environmentNotAllowed)
    }

    func testATransactionOfAnotherAppIsRefused() async throws {
        try scriptInfo(.production, "1800", ServerAPIFixture.transaction("1800", bundleId: "com.other.app"))
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verify(.transactionId("1800"))
        }
        XCTAssertEqual(error?.code, .bundleIdMismatch)
    }

    /// The transaction id path asks the claim's policy about the transaction Apple returned, as the
    /// signed transaction, app transaction, receipt and order paths do, and before it asks Apple
    /// anything more (the chain's statuses): a transaction the policy refuses is refused.
    func testATransactionIdWhoseTransactionThePolicyRefusesIsRefusedBeforeItsStatusesAreRead() async throws {
        let sub = "Auto-Renewable Subscription"
        try scriptInfo(.production, "1850", ServerAPIFixture.transaction("1850", type: sub))
        let policy = RefusingTransactions()
        let (adapter, app) = (try fx.adapter(), fx.app())
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await adapter.verify(.transactionId("1850"), for: app, policy: policy)
        }
        XCTAssertEqual(error?.code, .bundleIdMismatch)
        XCTAssertEqual(policy.asked, [EvidenceIdentity(bundleId: ServerAPIFixture.bundleId, environment: .production,
                                                       kind: .transaction)])
        XCTAssertEqual(fx.server.requests.map(\.path), ["/production/inApps/v1/transactions/1850"],
                       "no status lookup for a refused transaction")
    }

    func testMissingKeyIsInvalidConfigurationNamingTheReference() async throws {
        let app = fx.app(serverAPI: .some(.init(issuerId: ServerAPIFixture.issuerId, keyId: ServerAPIFixture.keyId,
                                                privateKey: SecretReference(.environmentVariable("IAPGW_TEST_P8_ABSENT")))))
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verify(.transactionId("1900"), app: app)
        }
        XCTAssertEqual(error?.code, .invalidConfiguration)
        XCTAssertTrue(error?.message.contains("env:IAPGW_TEST_P8_ABSENT") == true, error?.message ?? "")
        XCTAssertEqual(fx.server.requests.count, 0)

        let none = fx.app(serverAPI: .some(nil))
        let noCredentials = await expectVerificationError { () async throws(VerificationError) in
            try await self.verify(.transactionId("1900"), app: none)
        }
        XCTAssertEqual(noCredentials?.code, .invalidConfiguration)
    }

    func testTheKeyFileContentsNeverAppearInErrorsOrLogs() async throws {
        // Apple rejects the key (the server expects another one): the error names the key id only.
        let otherKey = try ECPrivateKey.generate(.p256)
        let otherKeyFile = fx.directory.appendingPathComponent("Other.p8")
        try Data(otherKey.pkcs8PEM.utf8).write(to: otherKeyFile)
        let app = fx.app(serverAPI: .some(.init(issuerId: ServerAPIFixture.issuerId, keyId: "ROTATED777",
                                                privateKey: SecretReference(.file(otherKeyFile)))))
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verify(.transactionId("2000"), app: app)
        }
        XCTAssertEqual(error?.code, .upstreamCredentialsRejected)
        XCTAssertTrue(error?.message.contains("ROTATED777") == true)
        let pemBody = otherKey.pkcs8PEM.split(separator: "\n").filter { !$0.hasPrefix("-----") }
        let everything = (error?.description ?? "") + fx.logLines.withLock { $0.joined(separator: "\n") }
        for line in pemBody { XCTAssertFalse(everything.contains(line)) }
        XCTAssertFalse(everything.contains("PRIVATE KEY"))

        // A file that is not a key: refused as configuration, its contents not echoed.
        try Data("not-a-key-SECRETVALUE".utf8).write(to: otherKeyFile)
        XCTAssertTrue(SecretFiles.shared.refreshNow(within: .seconds(10)), "the rewritten key file is read")
        let garbled = await expectVerificationError { () async throws(VerificationError) in
            try await self.verify(.transactionId("2000"), app: app, adapter: try! self.fx.adapter())
        }
        XCTAssertEqual(garbled?.code, .invalidConfiguration)
        XCTAssertFalse(garbled?.message.contains("SECRETVALUE") == true)
    }

    func testRetriesExhaustedReachTheCallerAsUpstreamUnavailableWithRetryAfter() async throws {
        fx.server.script("GET", .production, "/inApps/v1/transactions/2100", ScriptedAppStoreServer.appleError(503, 5000001, retryAfter: 4))
        let error = await expectVerificationError { () async throws(VerificationError) in
            try await self.verify(.transactionId("2100"))
        }
        XCTAssertEqual(error?.code, .upstreamUnavailable)
        XCTAssertEqual(error?.retryAfterSeconds, 4)
    }
}

/// A policy that accepts every environment and refuses every transaction it is asked about,
/// recording what it was asked.
private final class RefusingTransactions: EvidencePolicy {
    private let identities = LockedBox([EvidenceIdentity]())
    var asked: [EvidenceIdentity] { identities.withLock { $0 } }

    func accepts(_ environment: AppStoreEnvironment) -> Bool { true }

    func admit(_ identity: EvidenceIdentity) throws(VerificationError) {
        identities.withLock { $0.append(identity) }
        guard identity.kind == .transaction else { return }
        throw VerificationError(.bundleIdMismatch, "the policy refuses this transaction")
    }
}
