import AppleTrust
import Foundation
import IAPCore
import IAPMapping
import TestPKI
import XCTest
@testable import Adapters
@testable import Gateway
@testable import IAPConfig

/// One table of identities, put to every path that reads what evidence says about its app: a
/// verifyReceipt answer, a receipt read locally (the migration path's claim), each kind of JWS Apple
/// signs (a transaction, on its own and as the Server API adapter takes a transaction id or a signed
/// transaction over HTTP; an app transaction; renewal info; a V2 notification through the decoder;
/// a retention request), a V1 notification body. Each path must
/// give the code its column says; reconciliation, consumption and the report model read their
/// environments from the same identity.
final class IdentityTableTests: LegacyAdapterTestCase {
    typealias Code = VerificationError.Code
    /// Not a code: what the table says where a path accepts the identity.
    static let accepted = Code(rawValue: "accepted")

    static let bundleId = LegacyFixtures.bundleId
    static let appAppleId = LegacyFixtures.appAppleId
    static let now = Date(timeIntervalSince1970: 1_760_000_000)
    static var nowMs: Int64 { Int64(now.timeIntervalSince1970 * 1000) }

    enum Path: String, CaseIterable {
        case verifyReceipt, localReceipt, transaction, transactionId, signedTransaction, appTransaction, renewalInfo
        case notificationV2, notificationV1, retention

        /// A transaction id's answer and a signed transaction are transactions: their column is that one.
        var column: Path { self == .transactionId || self == .signedTransaction ? .transaction : self }
    }

    fileprivate struct Row {
        let name: String
        let bundleId: String?
        let appAppleId: Int64?
        let environment: String
        /// The answer on every path, but where `except` says otherwise.
        let refusal: Code
        var except: [Path: Code] = [:]

        func expected(_ path: Path) -> Code { except[path.column] ?? refusal }
    }

    /// What a member a path's evidence never states means: V1 bodies carry no app id, renewal info and
    /// retention requests no bundle; retention requests always carry an app id (Apple's model).
    fileprivate static let table: [Row] = [
        Row(name: "this app in Production", bundleId: bundleId, appAppleId: appAppleId, environment: "Production", refusal: accepted),
        Row(name: "this app in Sandbox, no app id", bundleId: bundleId, appAppleId: nil, environment: "Sandbox", refusal: accepted,
            except: [.retention: .missingField]),
        Row(name: "this app in Sandbox, app id 0", bundleId: bundleId, appAppleId: 0, environment: "Sandbox", refusal: accepted,
            except: [.retention: .appAppleIdMismatch]),
        Row(name: "another bundle", bundleId: "com.example.other", appAppleId: appAppleId, environment: "Production",
            refusal: .bundleIdMismatch),
        Row(name: "no bundle", bundleId: nil, appAppleId: appAppleId, environment: "Production", refusal: .bundleIdMismatch,
            except: [.renewalInfo: accepted, .retention: accepted]),
        Row(name: "another app id in Production", bundleId: bundleId, appAppleId: 42, environment: "Production",
            refusal: .appAppleIdMismatch, except: [.notificationV1: accepted]),
        Row(name: "another app id in Sandbox", bundleId: bundleId, appAppleId: 42, environment: "Sandbox",
            refusal: .appAppleIdMismatch, except: [.notificationV1: accepted]),
        Row(name: "no app id in Production", bundleId: bundleId, appAppleId: nil, environment: "Production",
            refusal: .appAppleIdMismatch,
            except: [.transaction: accepted, .renewalInfo: accepted, .notificationV1: accepted, .retention: .missingField]),
        Row(name: "Xcode data", bundleId: bundleId, appAppleId: appAppleId, environment: "Xcode", refusal: .testEnvironmentNotAllowed,
            except: [.verifyReceipt: .environmentNotAllowed, .localReceipt: .environmentNotAllowed,
                     .notificationV1: .invalidFieldType]),
        Row(name: "an environment Apple does not have", bundleId: bundleId, appAppleId: appAppleId, environment: "Staging",
            refusal: .environmentNotAllowed, except: [.notificationV1: .invalidFieldType]),
    ]

    func testEveryPathGivesEveryIdentityTheCodeOfTheTable() async throws {
        let setup = try JWSSetup()
        var wrong: [String] = []
        do {
            for (index, row) in Self.table.enumerated() {
                try setup.scriptTransaction(row, id: "30000000000000\(index)")
                for path in Path.allCases {
                    let found = await outcome(of: row, number: index, on: path, setup)
                    if found != row.expected(path) {
                        wrong.append("\(row.name) on \(path): \(found.rawValue), the table says \(row.expected(path).rawValue)")
                    }
                }
            }
        } catch {
            await setup.serverAPI.tearDown()
            throw error
        }
        await setup.serverAPI.tearDown()
        XCTAssertEqual(wrong, [], wrong.joined(separator: "\n"))
    }

    /// The Sandbox of a Production app is an App Review account's only: the claim's identity, on the
    /// receipt path as on every other, and Apple's own messages may come from there.
    func testSandboxIsTheAppReviewAccountsOnlyAndApplesOwn() async throws {
        let app = LegacyFixtures.app(environments: [.production], sandboxAccounts: ["app-review"])
        XCTAssertEqual(app.identity(for: .account("someone")).environments, [.production])
        XCTAssertEqual(app.identity(for: .account("app-review")).environments, [.production, .sandbox])
        XCTAssertEqual(app.identity(for: .apple).environments, [.production, .sandbox])
        let sandboxAnswer = try serve { _, _, _ in .json(200, LegacyFixtures.validAnswer(environment: "Sandbox", appItemId: 0)) }
        let refused = await refusal(try adapter(sandboxAnswer.endpoints), account: "someone", app: app)
        XCTAssertEqual(refused?.code, .environmentNotAllowed)
        let accepted = try await adapter(sandboxAnswer.endpoints)
            .verify(.appReceipt(base64: LegacyFixtures.receipt, nonce: nil), account: "app-review", for: app)
        XCTAssertEqual(accepted.environment, .sandbox)
    }

    /// Reconciliation asks the hosts the app's notifications may come from; consumption answers and
    /// the report model's verdict use its primary environment: all read from `identity(for: .apple)`.
    func testReconciliationConsumptionAndReportReadTheSameIdentity() {
        let cases: [(Set<AppStoreEnvironment>, Set<String>, [ServerAPIEnvironment], String)] = [
            ([.production], [], [.production], "Production"),
            ([.production], ["app-review"], [.production, .sandbox], "Production"),
            ([.sandbox], [], [.sandbox], "Sandbox"),
            ([.production, .sandbox], [], [.production, .sandbox], "Production"),
        ]
        for (environments, reviewers, hosts, primary) in cases {
            let app = LegacyFixtures.app(environments: environments, sandboxAccounts: reviewers)
            XCTAssertEqual(Reconciler.environments(app), hosts, "\(environments) \(reviewers)")
            XCTAssertEqual(ReadinessCriteria(app: app).primaryEnvironment, primary, "\(environments) \(reviewers)")
            XCTAssertEqual(app.identity(for: .apple).primaryEnvironment.rawValue, primary)
        }
    }

    // MARK: One row on one path

    private func outcome(of row: Row, number: Int, on path: Path, _ setup: JWSSetup) async -> Code {
        do {
            switch path {
            case .verifyReceipt:
                let answer = try Self.receiptAnswer(row)
                let server = try serve { _, _, _ in .json(200, answer) }
                _ = try await adapter(server.endpoints)
                    .verify(.appReceipt(base64: LegacyFixtures.receipt, nonce: nil), account: "account-1", for: setup.app)
            case .localReceipt:
                // What the Server API adapter puts to the claim after reading a receipt's signed payload.
                try ClaimPolicy(app: setup.app, claimant: .account("account-1"))
                    .admit(EvidenceIdentity(bundleId: row.bundleId, appAppleId: row.appAppleId,
                                            environment: AppStoreEnvironment(rawValue: row.environment), kind: .receipt))
            case .transaction:
                _ = try setup.verifier.verifyAndDecodeTransaction(try setup.sign(Self.transaction(row)))
            case .transactionId:
                _ = try await setup.serverAPIAdapter.verify(.transactionId("30000000000000\(number)"), account: "account-1",
                                                            for: setup.serverAPIApp)
            case .signedTransaction:
                let jws = try setup.serverAPI.sign(Self.transaction(row, id: "30000000000000\(number)", nowMs: ServerAPIFixture.nowMs))
                _ = try await setup.serverAPIAdapter.verify(.signedTransaction(jws), account: "account-1", for: setup.serverAPIApp)
            case .appTransaction:
                _ = try setup.verifier.verifyAndDecodeAppTransaction(try setup.sign(Self.appTransaction(row)))
            case .renewalInfo:
                _ = try setup.verifier.verifyAndDecodeRenewalInfo(try setup.sign(Self.renewalInfo(row)))
            case .notificationV2:
                let jws = try setup.sign(Self.notification(row))
                _ = try setup.decoder.decode(body: Array("{\"signedPayload\":\"\(jws)\"}".utf8), app: setup.app)
            case .notificationV1:
                _ = try setup.decoder.decode(body: try Self.v1Body(row), app: setup.app)
            case .retention:
                _ = try setup.verifier.verifyAndDecodeRealtimeRequest(try setup.sign(Self.realtimeRequest(row)))
            }
            return Self.accepted
        } catch let error as VerificationError {
            return error.code
        } catch {
            return Code(rawValue: "UNEXPECTED \(error)")
        }
    }

    // MARK: Evidence stating a row's identity

    /// The members of a row that are stated; nil ones are absent, never null.
    fileprivate static func identity(_ row: Row, bundle: String = "bundleId", appId: String = "appAppleId",
                                 environment: String = "environment") -> [String: JSONValue] {
        var o: [String: JSONValue] = [environment: .string(row.environment)]
        if let b = row.bundleId { o[bundle] = .string(b) }
        if let a = row.appAppleId { o[appId] = .int(a) }
        return o
    }

    /// `nowMs`: the Server API adapter verifies at the real time, against a leaf valid around it.
    fileprivate static func transaction(_ row: Row, id: String = "2000000000000001", nowMs: Int64 = nowMs) -> JSONValue {
        var t = identity(row)
        t.merge(["transactionId": .string(id), "originalTransactionId": .string(id), "productId": "com.example.legacy.lifetime",
                 "purchaseDate": .int(nowMs - 60_000), "quantity": 1, "type": "Non-Consumable",
                 "inAppOwnershipType": "PURCHASED", "signedDate": .int(nowMs - 1_000)]) { a, _ in a }
        return .object(t)
    }

    private static func appTransaction(_ row: Row) -> JSONValue {
        var a = identity(row, environment: "receiptType")
        a.merge(["receiptCreationDate": .int(nowMs - 1_000), "originalPurchaseDate": .int(nowMs - 86_400_000),
                 "applicationVersion": "7", "appTransactionId": "704000000000001"]) { a, _ in a }
        return .object(a)
    }

    private static func renewalInfo(_ row: Row) -> JSONValue {
        var r = identity(row)
        r.merge(["originalTransactionId": "2000000000000001", "autoRenewProductId": "com.example.legacy.monthly",
                 "autoRenewStatus": 1, "signedDate": .int(nowMs - 1_000)]) { a, _ in a }
        return .object(r)
    }

    private static func notification(_ row: Row) -> JSONValue {
        .object(["notificationType": "TEST", "notificationUUID": "6d0f8a6c-0000-4000-8000-0000000000aa", "version": "2.0",
                 "signedDate": .int(nowMs - 500), "data": .object(identity(row))])
    }

    private static func realtimeRequest(_ row: Row) -> JSONValue {
        var r = identity(row)
        r.merge(["originalTransactionId": "2000000000000001", "productId": "com.example.legacy.monthly", "userLocale": "en-US",
                 "requestIdentifier": "0b8d3e4c-0000-4000-8000-000000000001", "signedDate": .int(nowMs - 100)]) { a, _ in a }
        return .object(r)
    }

    private static func v1Body(_ row: Row) throws -> [UInt8] {
        var o: [String: JSONValue] = [
            "password": .string(LegacyFixtures.currentSecret), "notification_type": "DID_RENEW",
            "environment": .string(row.environment == "Production" ? "PROD" : row.environment),
            "unified_receipt": .object(["latest_receipt": .string(LegacyFixtures.receipt)]),
        ]
        if let b = row.bundleId { o["bid"] = .string(b) }
        return Array(JSONValue.object(o).jsonText.utf8)
    }

    /// verifyReceipt's status-0 answer, its `environment`, `bundle_id` and `app_item_id` the row's.
    private static func receiptAnswer(_ row: Row) throws -> String {
        guard case .object(var top) = try StrictJSON().parse(Array(LegacyFixtures.validAnswer().utf8)),
              case .object(var receipt)? = top["receipt"] else { throw VerificationError(.malformedJSON, "fixture") }
        top["environment"] = .string(row.environment)
        receipt["bundle_id"] = row.bundleId.map(JSONValue.string)
        receipt["app_item_id"] = row.appAppleId.map(JSONValue.int)
        top["receipt"] = .object(receipt)
        return JSONValue.object(top).jsonText
    }

    /// The app (Production and Sandbox, its app id, no local test data), its JWS verifier as the
    /// gateway builds it, a notification decoder over the same verifiers, and the Server API adapter
    /// before a scripted App Store for the same identity (its own test PKI and clock).
    fileprivate struct JWSSetup {
        let ca: TestPKI.CertificateAuthority
        let signer: TestPKI.JWSSigner
        let app: AppPolicy
        let verifier: SignedDataVerifier
        let decoder: NotificationDecoder
        let serverAPI: ServerAPIFixture
        let serverAPIApp: AppPolicy
        let serverAPIAdapter: ServerAPIAdapter

        init() throws {
            ca = try .make()
            signer = ca.signer(leaf: try ca.issueLeaf(validity: .around(IdentityTableTests.now, days: 365)))
            let rootFile = FileManager.default.temporaryDirectory.appendingPathComponent("identity-table-root-\(UUID().uuidString).der")
            try ca.root.der.write(to: rootFile)
            var app = LegacyFixtures.app(environments: [.production, .sandbox])
            app.trustRoots = .init(jws: [rootFile], receipts: [])
            self.app = app
            let verifiers = AppVerifiers(now: { IdentityTableTests.now })
            verifier = try verifiers.verifier(for: app)
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            serverAPI = try ServerAPIFixture()
            // Notifications are read by the adapter that owns them, on this table's verifiers.
            let mappings = try MappingSet.load(directory: root.appendingPathComponent("Mappings"))
            var options = ServerAPIAdapter.Options()
            options.verifiers = verifiers
            let notificationReader = ServerAPIAdapter(upstream: try serverAPI.upstream(), baseURLs: serverAPI.server.baseURLs,
                                                      normalizer: try ServerAPINormalizer(try XCTUnwrap(mappings.latest(source: "serverAPI"))),
                                                      options: options)
            decoder = NotificationDecoder(signed: notificationReader, environment: LegacyFixtures.environment, verifiers: verifiers)
            var serverAPIApp = serverAPI.app(environments: [.production, .sandbox], bundleId: IdentityTableTests.bundleId)
            serverAPIApp.appAppleId = IdentityTableTests.appAppleId
            self.serverAPIApp = serverAPIApp
            serverAPIAdapter = try serverAPI.adapter()
        }

        /// Get Transaction Info answers with the row's transaction from the host of its environment
        /// (Sandbox's after Production's "not found"; any other from Production's).
        func scriptTransaction(_ row: Row, id: String) throws {
            let signed = try serverAPI.sign(IdentityTableTests.transaction(row, id: id, nowMs: ServerAPIFixture.nowMs))
            let answer = ScriptedAppStoreServer.ok(["signedTransactionInfo": .string(signed)])
            let path = "/inApps/v1/transactions/\(id)"
            if row.environment == "Sandbox" {
                serverAPI.server.script("GET", .production, path, ScriptedAppStoreServer.appleError(404, 4040010))
                serverAPI.server.script("GET", .sandbox, path, answer)
            } else {
                serverAPI.server.script("GET", .production, path, answer)
            }
        }

        func sign(_ payload: JSONValue) throws -> String { try signer.sign(payload) }
    }
}
