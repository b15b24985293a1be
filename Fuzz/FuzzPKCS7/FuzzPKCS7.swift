// libFuzzer target: the legacy receipt's PKCS#7 verification path, beyond what FuzzDER parses.
// First byte even: the rest is a receipt (PKCS#7 DER) verified against Apple's real Inc. Root, read
// from IAPGW_APPLE_REAL, at its own creation date (signer info, certificates, chain, digest). Odd:
// the receipt's content (or the bytes themselves when they are no PKCS#7) is signed again by the
// simulator's PKI and verified against that root, so payload parsing, the creation date and the
// chain's validity at it are reached behind a valid signature. Any outcome but a VerificationError
// or a value is a bug. Seeds: Apple's real receipts with both first bytes (Scripts/fuzz.sh).
import AppReceipts
import AppStoreSimulator
import Foundation
import IAPCore
import TestPKI

/// A chain valid from 2000 to 2080, so a receipt's own creation date decides.
let pki: SimulatorPKI = {
    let validity = TestPKI.Validity(notBefore: Date(timeIntervalSince1970: 946_684_800),
                                    notAfter: Date(timeIntervalSince1970: 3_471_292_800))
    do { return try SimulatorPKI(validity: validity, leafValidity: validity) } catch { fatalError("FuzzPKCS7 setup: \(error)") }
}()

/// Apple's real receipt root, through the reader the gateway and `iapgw receipt inspect` use.
let appleReader: AppReceiptReader = {
    guard let root = try? AppleRealVectors.data("AppleIncRootCertificate.cer"),
          let reader = try? AppReceiptReader(roots: [root]) else {
        fatalError("FuzzPKCS7 setup: AppleIncRootCertificate.cer not found (IAPGW_APPLE_REAL)")
    }
    return reader
}()

let simulatorVerifier: ReceiptVerifier = {
    do { return try ReceiptVerifier(rootCertificates: [pki.rootCertificateDER]) } catch { fatalError("FuzzPKCS7 setup: \(error)") }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    if data[0] & 1 == 0 {
        _ = try? appleReader.read(der: bytes, mode: .verified)
        _ = try? appleReader.read(der: bytes, mode: .unverified)
    } else {
        let content = (try? PKCS7SignedData.parse(bytes))?.content ?? bytes
        guard let signed = try? pki.signPKCS7(content) else { return 0 }
        _ = try? simulatorVerifier.verify(signed)
    }
    return 0
}
