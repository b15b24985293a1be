// libFuzzer target: what lies behind a valid signature. The bytes after the first are a payload,
// signed here with a test PKI (ES256, x5c) and verified in full by a SignedDataVerifier pinning that
// PKI's root: payload parsing and models, dates against the chain and the clock, bundle / app /
// environment binding, and for notifications every inner JWS with its agreement with the envelope.
// Any JSON object under signedTransactionInfo, signedRenewalInfo or signedAppTransactionInfo is
// itself signed and put there as a JWS, so the fuzzer reaches the inner path without forging.
// Any outcome but a VerificationError or a value is a bug (a crash, a hang or a sanitizer report).
//
// The first byte picks the kind (bits 0-1: transaction, renewal info, notification, app
// transaction) and the app policy (bit 2: com.goodheartapp with Xcode data allowed, or
// com.nineton.taller with its appAppleId), the apps of Apple's real vectors that seed it.
// Run: Scripts/fuzz.sh 60 FuzzSignedJWS
import AppleTrust
import Foundation
import IAPCore
import TestPKI

/// A chain valid from 2000 to 2080, so the payload's own dates decide; built once per run.
let signer: TestPKI.JWSSigner = {
    let validity = TestPKI.Validity(notBefore: Date(timeIntervalSince1970: 946_684_800),
                                    notAfter: Date(timeIntervalSince1970: 3_471_292_800))
    do {
        let authority = try TestPKI.CertificateAuthority.make(validity: validity)
        return authority.signer(leaf: try authority.issueLeaf(validity: validity))
    } catch {
        fatalError("FuzzSignedJWS setup: \(error)")
    }
}()

let verifiers: [SignedDataVerifier] = {
    let root = signer.x5c[2]
    let now: @Sendable () -> Date = { Date(timeIntervalSince1970: 1_900_000_000) }
    do {
        return [
            try SignedDataVerifier(rootCertificates: [root], bundleId: "com.goodheartapp", appAppleId: nil,
                                   environments: [.production, .sandbox, .xcode], allowLocalTestEnvironments: true,
                                   now: now, cacheCapacity: 8),
            try SignedDataVerifier(rootCertificates: [root], bundleId: "com.nineton.taller", appAppleId: 6450284872,
                                   environments: [.production, .sandbox], now: now, cacheCapacity: 8),
        ]
    } catch {
        fatalError("FuzzSignedJWS setup: \(error)")
    }
}()

let innerJWSKeys: Set<String> = ["signedTransactionInfo", "signedRenewalInfo", "signedAppTransactionInfo"]

/// `value` with every object under an inner-JWS key replaced by that object, signed.
func signingInnerObjects(_ value: JSONValue) -> JSONValue {
    switch value {
    case .object(let members):
        var out: [String: JSONValue] = [:]
        for (key, member) in members {
            if innerJWSKeys.contains(key), case .object = member, let jws = try? signer.sign(member) {
                out[key] = .string(jws)
            } else {
                out[key] = signingInnerObjects(member)
            }
        }
        return .object(out)
    case .array(let items): return .array(items.map(signingInnerObjects))
    default: return value
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let text = String(decoding: UnsafeBufferPointer(start: data + 1, count: size - 1), as: UTF8.self)
    // As given (duplicate keys, odd numbers and all) unless an inner object had to be signed.
    var payload = text
    if let parsed = try? StrictJSON().parse(text) {
        let signed = signingInnerObjects(parsed)
        if signed != parsed { payload = signed.jsonText }
    }
    guard let jws = try? TestPKI.signJWS(payloadText: payload, chain: signer.x5c, key: signer.key) else { return 0 }
    let verifier = verifiers[Int(selector >> 2) & 1]
    switch selector & 3 {
    case 0: _ = try? verifier.verifyAndDecodeTransaction(jws)
    case 1: _ = try? verifier.verifyAndDecodeRenewalInfo(jws)
    case 2: _ = try? verifier.verifyAndDecodeNotification(jws)
    default: _ = try? verifier.verifyAndDecodeAppTransaction(jws)
    }
    return 0
}
