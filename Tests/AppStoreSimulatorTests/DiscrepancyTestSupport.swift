import AppleTrust
import AppReceipts
@testable import AppStoreSimulator
import Foundation
import IAPCore
import IAPMapping
import UpstreamHTTP
import XCTest

/// Both generations of the simulator read over HTTP and normalised with the shipped mapping files,
/// so a test compares canonical records the way a migration comparison does.
struct GenerationReader {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    let fixture: SimulatorFixture
    let legacy: LegacyReceiptNormalizer
    let serverAPI: ServerAPINormalizer
    /// Canonical fields either mapping file declares as a known difference between the generations.
    let knownDifferences: Set<String>
    let verifier: SignedDataVerifier

    init(_ fixture: SimulatorFixture) throws {
        self.fixture = fixture
        let mappings = try MappingSet.load(directory: Self.packageRoot.appendingPathComponent("Mappings"))
        let legacyFile = try XCTUnwrap(mappings.version(source: "verifyReceipt", "v1"))
        let serverFile = try XCTUnwrap(mappings.version(source: "serverAPI", "v1"))
        legacy = try LegacyReceiptNormalizer(legacyFile)
        serverAPI = try ServerAPINormalizer(serverFile)
        knownDifferences = Set(legacyFile.knownDifferences(kind: "in_app").keys)
            .union(serverFile.knownDifferences(kind: "transaction").keys)
        verifier = try fixture.verifier()
    }

    /// verifyReceipt's answer for a receipt, by transactionId.
    func legacyRecords(receipt: String) async throws -> [String: CanonicalTransaction] {
        let (status, json) = try await fixture.verifyReceipt(.object([
            "receipt-data": .string(receipt), "password": .string(SimulatorFixture.sharedSecret),
        ]))
        XCTAssertEqual(status, 200)
        let normalized = try legacy.normalize(verifyReceiptResponse: .object(json))
        XCTAssertEqual(normalized.status, 0)
        XCTAssertEqual(normalized.unmappedFields, [])
        return Dictionary(uniqueKeysWithValues: normalized.transactions.map { ($0.transactionId, $0) })
    }

    /// Get Transaction History, every page, each JWS verified against the simulator root; an id the
    /// Server API does not know (404 4040010) has no records there, as the gateway reads it.
    func serverAPIRecords(anyTransactionId id: String) async throws -> [String: CanonicalTransaction] {
        let token = try fixture.token()
        var out: [String: CanonicalTransaction] = [:]
        var revision: String?
        for _ in 0..<50 {
            let query = revision.map { "?revision=\($0)" } ?? ""
            let r = try await fixture.serverAPI("/inApps/v2/history/\(id)\(query)", token: token)
            if r.status == 404, try fixture.json(r)["errorCode"] == .int(4040010) { return out }
            XCTAssertEqual(r.status, 200)
            let json = try fixture.json(r)
            for signed in try XCTUnwrap(json["signedTransactions"]?.arrayValue) {
                let t = try serverAPI.normalize(transaction: try verifier.verifyAndDecodeTransaction(try XCTUnwrap(signed.stringValue)).raw)
                out[t.transactionId] = t
            }
            revision = json["revision"]?.stringValue
            if json["hasMore"] != .bool(true) { break }
        }
        return out
    }

    /// Get All Subscription Statuses: the transactions named in `lastTransactions`, with their status.
    func statusTransactions(anyTransactionId id: String) async throws -> [(status: Int64, transaction: CanonicalTransaction)] {
        let r = try await fixture.serverAPI("/inApps/v1/subscriptions/\(id)", token: try fixture.token())
        XCTAssertEqual(r.status, 200)
        var out: [(Int64, CanonicalTransaction)] = []
        for group in try XCTUnwrap(try fixture.json(r)["data"]?.arrayValue) {
            for last in try XCTUnwrap(group.objectValue?["lastTransactions"]?.arrayValue) {
                let o = try XCTUnwrap(last.objectValue)
                guard case .int(let status)? = o["status"] else { XCTFail("status is not an integer"); continue }
                let jws = try XCTUnwrap(o["signedTransactionInfo"]?.stringValue)
                out.append((status, try serverAPI.normalize(transaction: try verifier.verifyAndDecodeTransaction(jws).raw)))
            }
        }
        return out
    }

    /// Get Transaction Info: the record, or the HTTP status and Apple error code when refused.
    func transactionInfo(_ id: String) async throws -> Result<CanonicalTransaction, ServerAPIRefusal> {
        let r = try await fixture.serverAPI("/inApps/v1/transactions/\(id)", token: try fixture.token())
        let json = try fixture.json(r)
        guard r.status == 200 else { return .failure(ServerAPIRefusal(status: r.status, errorCode: json["errorCode"])) }
        let jws = try XCTUnwrap(json["signedTransactionInfo"]?.stringValue)
        return .success(try serverAPI.normalize(transaction: try verifier.verifyAndDecodeTransaction(jws).raw))
    }

    /// The transaction ids the PKCS#7 receipt itself lists (verified against the simulator root).
    func receiptTransactionIds(_ receipt: String) throws -> Set<String> {
        let reader = try AppReceiptReader(roots: [fixture.sim.rootCertificateDER])
        let read = try reader.read(der: Array(try XCTUnwrap(Data(base64Encoded: receipt))), mode: .unverified)
        XCTAssertTrue(read.signatureVerified)
        return Set(read.receipt.inAppPurchases.compactMap(\.transactionId))
    }

    /// The canonical fields whose values differ, declared known differences and the bookkeeping
    /// fields (source, mappingVersion) left out.
    func differingFields(_ a: CanonicalTransaction, _ b: CanonicalTransaction) -> Set<String> {
        let x = a.jsonValue.objectValue ?? [:], y = b.jsonValue.objectValue ?? [:]
        let ignored = knownDifferences.union(["source", "mappingVersion"])
        return Set(x.keys).union(y.keys).subtracting(ignored).filter { x[$0] != y[$0] }
    }

    /// Every disagreement between two answers, as "transactionId:field" or "transactionId:onlyIn<Side>".
    func disagreements(legacy l: [String: CanonicalTransaction], serverAPI s: [String: CanonicalTransaction]) -> Set<String> {
        var out: Set<String> = []
        for id in Set(l.keys).union(s.keys) {
            switch (l[id], s[id]) {
            case let (a?, b?): out.formUnion(differingFields(a, b).map { "\(id):\($0)" })
            case (_?, nil): out.insert("\(id):onlyInLegacy")
            case (nil, _?): out.insert("\(id):onlyInServerAPI")
            case (nil, nil): break
            }
        }
        return out
    }

    /// Both generations for one owner's receipt, and their disagreements.
    func compare(_ p: SimulatedPurchase) async throws -> Set<String> {
        let l = try await legacyRecords(receipt: p.receiptBase64)
        let s = try await serverAPIRecords(anyTransactionId: p.transactionId)
        return disagreements(legacy: l, serverAPI: s)
    }
}

struct ServerAPIRefusal: Error, Equatable {
    let status: Int
    let errorCode: JSONValue?
}

extension SimulatorFixture {
    /// Sends an admin request; returns the status and the JSON object answered.
    func admin(_ method: String, _ path: String, body: JSONValue? = nil) async throws -> (Int, [String: JSONValue]) {
        let r = try await client.send(UpstreamRequest(method: method, url: "\(sim.baseURL.absoluteString)/admin\(path)",
                                                     headers: [("Content-Type", "application/json")],
                                                     body: body.map { Array($0.jsonText.utf8) }))
        return (r.status, r.body.isEmpty ? [:] : (try StrictJSON().parse(r.body).objectValue ?? [:]))
    }
}
