// libFuzzer target: OCSP answers as a verifier with online checks reads them (parsing, response
// status, signature and responder, certificate id, freshness, good / revoked / unknown). A valid
// transaction signed by a test PKI whose certificates name an OCSP responder is verified; the
// transport hands back, for one of the two checks, an answer built from the input, and the test
// PKI's honest answer for the other. Any outcome but a VerificationError or a value is a bug.
//
// First byte: bit 0 clear, the rest is the answer as is (raw DER); set, the test responder builds
// the answer from the next four bytes (thisUpdate age, nextUpdate, unknown / revoked, who signs)
// and every following three bytes flip one byte of it (offset high, offset low, XOR mask), so
// the signed fields are reached with a signature that verifies. Bit 1 picks the check it answers
// (leaf or intermediate). Run: Scripts/fuzz.sh 60 FuzzOCSP
import AppleTrust
import Foundation
import IAPCore
import Synchronization
import TestPKI

/// Never contacted: the transport below answers in process.
let responderURL = "http://127.0.0.1:9/ocsp"

struct Fixture {
    let authority: TestPKI.CertificateAuthority
    let leaf: TestPKI.Identity
    let stranger: TestPKI.Identity
    let jws: String
}

let fixture: Fixture = {
    do {
        let authority = try TestPKI.CertificateAuthority.make(intermediateOCSPURL: responderURL)
        let leaf = try authority.issueLeaf(ocspURL: responderURL)
        let stranger = try TestPKI.CertificateAuthority.make().intermediate
        let payload: JSONValue = .object([
            "transactionId": .string("2000000847061981"), "originalTransactionId": .string("2000000847061981"),
            "bundleId": .string("com.fuzz.ocsp"), "productId": .string("fuzz.product"), "type": .string("Consumable"),
            "purchaseDate": .int(1_739_161_772_000), "originalPurchaseDate": .int(1_739_161_772_000),
            "signedDate": .int(Int64(Date().timeIntervalSince1970 * 1000)), "environment": .string("Sandbox"),
            "quantity": .int(1), "inAppOwnershipType": .string("PURCHASED"), "storefront": .string("JPN"),
            "storefrontId": .string("143462"), "transactionReason": .string("PURCHASE"),
        ])
        return Fixture(authority: authority, leaf: leaf, stranger: stranger,
                       jws: try authority.signer(leaf: leaf).sign(payload))
    } catch {
        fatalError("FuzzOCSP setup: \(error)")
    }
}()

/// Answers the check numbered `fuzzedCall` (0 leaf, 1 intermediate) with `fuzzed`, the other honestly.
final class FuzzTransport: OCSPTransport {
    let fuzzed: @Sendable (Data) throws(VerificationError) -> Data
    let fuzzedCall: Int
    private let calls = Atomic<Int>(0)

    init(fuzzedCall: Int, fuzzed: @escaping @Sendable (Data) throws(VerificationError) -> Data) {
        self.fuzzedCall = fuzzedCall
        self.fuzzed = fuzzed
    }

    func post(_ body: Data, to url: URL, timeout: Duration) async throws(VerificationError) -> Data {
        let call = calls.add(1, ordering: .relaxed).oldValue
        if call == fuzzedCall { return try fuzzed(body) }
        return try TestPKI.OCSPResponder(authority: fixture.authority).respond(to: body)
    }
}

/// The test responder configured by four input bytes, its answer then patched by the rest.
func builtAnswer(_ input: [UInt8]) -> @Sendable (Data) throws(VerificationError) -> Data {
    var params = Array(input.prefix(4))
    while params.count < 4 { params.append(0) }
    var responder = TestPKI.OCSPResponder(authority: fixture.authority)
    // Hours: 0...199 in the past, 200...255 that many hours less 200 in the future.
    responder.thisUpdateAge = params[0] < 200 ? Double(params[0]) * 3600 : -Double(params[0] - 199) * 3600
    responder.nextUpdateIn = params[1] == 0 ? nil : Double(Int(params[1]) - 128) * 3600
    responder.answersUnknown = params[2] & 1 != 0
    if params[2] & 2 != 0 { responder.revoked = [fixture.leaf.certificate, fixture.authority.intermediate.certificate] }
    switch params[3] & 3 {
    case 1: responder.signedBy = fixture.authority.root
    case 2: responder.signedBy = fixture.leaf
    case 3: responder.signedBy = fixture.stranger
    default: break
    }
    let patches = Array(input.dropFirst(4))
    let chosen = responder
    return { (request: Data) throws(VerificationError) -> Data in
        var answer = try chosen.respond(to: request)
        var i = 0
        while i + 2 < patches.count, !answer.isEmpty {
            let offset = (Int(patches[i]) << 8 | Int(patches[i + 1])) % answer.count
            answer[answer.startIndex + offset] ^= patches[i + 2]
            i += 3
        }
        return answer
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let rest = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let raw = Data(rest)
    let answer: @Sendable (Data) throws(VerificationError) -> Data
    if data[0] & 1 == 0 { answer = { (_: Data) throws(VerificationError) -> Data in raw } } else { answer = builtAnswer(rest) }
    // A verifier per input: a good answer is cached per chain, and every input must be asked.
    guard let verifier = try? SignedDataVerifier(
        rootCertificates: [fixture.authority.root.der], bundleId: "com.fuzz.ocsp", appAppleId: nil,
        environments: [.sandbox], enableOnlineChecks: true, cacheCapacity: 1,
        ocspTransport: FuzzTransport(fuzzedCall: Int(data[0] >> 1) & 1, fuzzed: answer)) else { fatalError("FuzzOCSP: verifier") }
    // The fuzzer's own thread waits for the async verification (it is not one of the pool's).
    let done = DispatchSemaphore(value: 0)
    Task {
        _ = try? await verifier.verifying { v throws(VerificationError) in try v.verifyAndDecodeTransaction(fixture.jws) }
        done.signal()
    }
    done.wait()
    return 0
}
