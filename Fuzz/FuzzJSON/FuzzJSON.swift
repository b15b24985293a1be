// libFuzzer target: bytes as JSON from outside (request bodies, verifyReceipt answers, decoded JWS
// payloads), through the strict parser and then the mapping engine for both generations. Any
// outcome but a VerificationError or a value is a bug (a crash, a hang, or a sanitizer report).
//
// Run: Scripts/fuzz.sh 60 FuzzJSON
import Foundation
import IAPCore
import IAPMapping

/// The mapping files, loaded once (from the repository's Mappings/ beside Fuzz/).
let normalizers: (LegacyReceiptNormalizer, ServerAPINormalizer)? = {
    let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Mappings")
    guard let set = try? MappingSet.load(directory: directory),
          let legacy = set.latest(source: "verifyReceipt"), let server = set.latest(source: "serverAPI"),
          let l = try? LegacyReceiptNormalizer(legacy), let s = try? ServerAPINormalizer(server) else { return nil }
    return (l, s)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard let value = try? StrictJSON(maxBytes: 1 << 20).parse(UnsafeBufferPointer(start: data, count: size)) else { return 0 }
    _ = value.jsonText
    guard let (legacy, server) = normalizers else { fatalError("Mappings/ not found beside Fuzz/") }
    _ = try? legacy.normalize(verifyReceiptResponse: value)
    _ = try? server.normalize(transaction: value)
    _ = try? server.normalize(renewalInfo: value)
    _ = try? server.normalize(appTransaction: value)
    return 0
}
