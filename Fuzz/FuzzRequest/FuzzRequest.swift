// libFuzzer target: what a client sends besides the path. First byte 0: the rest is a JSON request
// body, read as the verify and nonce endpoints read it (Content-Type, strict JSON, allowed members,
// account, exactly one kind of evidence). 1: the rest is a query string, decoded as the HTTP server
// decodes it (percent-decoding, UTF-8) and then read as the comparisons endpoint reads its filters.
// Any outcome but a VerificationError or a value is a bug. Run: Scripts/fuzz.sh 60 FuzzRequest
import Adapters
import Foundation
@testable import Gateway
@testable import HTTPServer
import IAPCore

// The built-in adapters' forms, as a gateway with both registers them.
let evidenceForms: [EvidenceForm] = [.receipt, .signedTransaction, .transactionId]
let verifyMembers = RequestBody.verifyMembers(evidenceForms)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let rest = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    if data[0] & 1 == 0 {
        let request = HTTPRequest(method: "POST", path: "/v1/apps/com.fuzz.app/verify",
                                  headers: ["Content-Type": "application/json"], body: rest)
        if let body = try? RequestBody(request, allowed: verifyMembers) {
            _ = try? body.account()
            _ = try? body.evidence(evidenceForms)
        }
        _ = try? RequestBody(request, allowed: ["account"]).account()
    } else {
        let text = String(decoding: rest, as: UTF8.self)
        guard let query = PercentDecoding.parseQuery(Substring(text)) else { return 0 }
        _ = try? ComparisonsEndpoint.parse(query, bundleId: "com.fuzz.app")
    }
    return 0
}
