// libFuzzer target: arbitrary bytes through the whole JWS decode/verify path (size, split,
// base64url, strict JSON, header, x5c DER parsing, chain, signature, payload models) against the
// real Apple Root CA - G3. Any outcome is fine except a crash, a hang or an undefined behaviour.
import AppleTrust
import Foundation
import IAPCore

/// Built once: the root is read from `IAPGW_APPLE_REAL` (or the checkout's ../shared) at start.
let verifier: SignedDataVerifier = {
    let dir = ProcessInfo.processInfo.environment["IAPGW_APPLE_REAL"]
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/testdata/apple-real").path
    let root = FileManager.default.contents(atPath: dir + "/AppleRootCA-G3.cer") ?? Data()
    return try! SignedDataVerifier(rootCertificates: [root], bundleId: "com.nineton.taller", appAppleId: 6450284872,
                                   environments: [.production, .sandbox], allowLocalTestEnvironments: true,
                                   now: { Date(timeIntervalSince1970: 1_730_000_000) }, cacheCapacity: 8)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    // The first byte picks the entry point so every payload model is reached.
    switch size > 0 ? data[0] % 4 : 0 {
    case 0: _ = try? verifier.verifyAndDecodeTransaction(text)
    case 1: _ = try? verifier.verifyAndDecodeRenewalInfo(text)
    case 2: _ = try? verifier.verifyAndDecodeNotification(text)
    default: _ = try? verifier.verifyAndDecodeAppTransaction(text)
    }
    _ = try? Base64URL.decode(text)
    _ = try? Base64URL.decodeStandardPadded(text)
    return 0
}
