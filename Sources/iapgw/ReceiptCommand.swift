import AppReceipts
import CommandLineSupport
import Foundation
import IAPCore

/// `iapgw receipt inspect`: prints every attribute and in-app record of a base64 legacy receipt
/// (an app receipt, or an iOS 6 transactionReceipt) read from stdin, with its signature outcome.
/// Transaction ids (and the in-app records and attributes that carry them) are printed only from
/// a verified receipt, or when `--unverified` says the caller knowingly takes unverified claims;
/// the gating lives in `inspectionJSON` so it is unit-tested.
struct ReceiptCommand: Subcommand {
    let name = "receipt"
    let summary = "inspect and verify legacy receipts"
    let usage = """
    usage: iapgw receipt inspect [--verify --root CERT.der ...] [--intermediate CERT.der ...]
                                 [--unverified] [--allow-xcode --xcode-root CERT.der ...]
                                 [--at-creation-date | --at RFC3339|now] < receipt.b64
      --verify            check the signature against the pinned --root certificates (DER)
      --intermediate      extra chain certificates for iOS 6 transaction receipts (e.g. Apple WWDR)
      --unverified        print in-app records and transaction ids even if the signature was not
                          verified (exit 0). Without it, an unverified receipt's body is printed
                          with its in-app records, transaction-id attributes and purchase-info ids
                          omitted and a "withheld" note.
      --allow-xcode       accept Xcode StoreKit Testing receipts, verified only against --xcode-root
      --xcode-root        a StoreKit Testing certificate (DER); never trusted for non-Xcode receipts
      --at-creation-date  check certificates at the receipt's creation/purchase date (default)
      --at                check certificates at this time instead
    exit: 0 ok, 1 refused or malformed, 2 usage
    """

    func run(_ args: inout CommandLineArguments) throws -> Int32 {
        guard args.positional() == "inspect" else { throw UsageError(message: "expected the subcommand 'inspect'") }
        let verify = args.flag("--verify")
        let rootPaths = try args.values("--root")
        let intermediatePaths = try args.values("--intermediate")
        let unverified = args.flag("--unverified")
        let allowXcode = args.flag("--allow-xcode")
        let xcodeRootPaths = try args.values("--xcode-root")
        let atCreation = args.flag("--at-creation-date")
        let atText = try args.value("--at")
        try args.finish()
        if verify && rootPaths.isEmpty { throw UsageError(message: "--verify needs at least one --root") }
        if !verify && !(rootPaths.isEmpty && intermediatePaths.isEmpty) { throw UsageError(message: "--root and --intermediate need --verify") }
        if !xcodeRootPaths.isEmpty && !(verify && allowXcode) { throw UsageError(message: "--xcode-root needs --verify and --allow-xcode") }
        if atCreation && atText != nil { throw UsageError(message: "--at and --at-creation-date exclude each other") }
        let time = try atText.map(parseTime)
        let roots = try rootPaths.map(readFile)
        let intermediates = try intermediatePaths.map(readFile)
        let xcodeRoots = try xcodeRootPaths.map(readFile)

        let input = FileHandle.standardInput.readData(ofLength: StrictBase64.defaultMaxInputBytes + 1)
        do throws(VerificationError) {
            let text = String(decoding: input, as: UTF8.self)
            let bytes = try StrictBase64.decode(text)
            var out: [String: JSONValue]
            let signatureVerified: Bool
            if bytes.first == UInt8(ascii: "{") {
                (out, signatureVerified) = try inspectTransactionReceipt(bytes, verify: verify, roots: roots,
                                                                         intermediates: intermediates, at: time, unverified: unverified)
            } else {
                let reader = try AppReceiptReader(roots: roots, xcodeRoots: xcodeRoots, allowXcodeReceipts: allowXcode)
                let result = try reader.read(der: bytes, mode: .unverified, at: time)
                signatureVerified = verify && result.signatureVerified
                guard case .object(let body) = result.inspectionJSON(includeUnverifiedIdentifiers: unverified) else { return 1 }
                out = body
                out["format"] = .string("appReceipt")
                out["signature"] = signatureJSON(verify: verify, verified: signatureVerified, error: result.signatureError)
            }
            print(JSONValue.object(out).jsonText)
            return verify && !signatureVerified && !unverified ? 1 : 0
        } catch {
            print(JSONValue.object(["error": .object(["code": .string(error.code.rawValue), "message": .string(error.message)])]).jsonText)
            return 1
        }
    }

    private func inspectTransactionReceipt(_ bytes: [UInt8], verify: Bool, roots: [Data], intermediates: [Data], at time: Date?,
                                           unverified: Bool) throws(VerificationError) -> ([String: JSONValue], Bool) {
        let receipt = try LegacyTransactionReceipt.parse(plist: bytes)
        var signatureError: VerificationError?
        if verify {
            do throws(VerificationError) {
                try LegacyTransactionReceiptVerifier(rootCertificates: roots, intermediateCertificates: intermediates).verify(receipt, at: time)
            } catch {
                signatureError = error
            }
        }
        let verified = verify && signatureError == nil
        guard case .object(var out) = receipt.inspectionJSON(signatureVerified: verified, includeUnverifiedIdentifiers: unverified) else {
            throw VerificationError(.malformedReceipt, "receipt has no JSON form")
        }
        out["format"] = .string("transactionReceipt")
        out["signature"] = signatureJSON(verify: verify, verified: verified, error: signatureError)
        return (out, verified)
    }

    private func signatureJSON(verify: Bool, verified: Bool, error: VerificationError?) -> JSONValue {
        guard verify else { return .object(["verified": .bool(false), "error": .null, "checked": .bool(false)]) }
        var o: [String: JSONValue] = ["verified": .bool(verified), "checked": .bool(true),
                                      "error": error.map { .string($0.code.rawValue) } ?? .null]
        if let error, !verified { o["message"] = .string(error.message) }
        return .object(o)
    }

    private func readFile(_ path: String) throws -> Data {
        guard let data = FileManager.default.contents(atPath: path) else { throw UsageError(message: "cannot read \(path)") }
        return data
    }

    private func parseTime(_ text: String) throws -> Date {
        if text == "now" { return Date() }
        guard let ms = RFC3339.milliseconds(text) else { throw UsageError(message: "--at needs an RFC 3339 time or 'now'") }
        return Date(timeIntervalSince1970: Double(ms) / 1000)
    }
}
