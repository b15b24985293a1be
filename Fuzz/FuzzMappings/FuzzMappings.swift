// libFuzzer target: bytes as a mapping file (Mappings/<source>/<version>.json, read at start-up and
// by `iapgw mappings check`), through the strict file parser, the mapping set, both normalizers'
// compilation, and, when a normalizer compiles, the mapping of the golden verifyReceipt and Server
// API answers (Fuzz/FuzzJSON/seeds/) with it. Any outcome but a VerificationError or a value is a bug.
// Seeds: the repository's own mapping files (Scripts/fuzz.sh). Run: Scripts/fuzz.sh 60 FuzzMappings
import Foundation
import IAPCore
import IAPMapping

/// The golden answers each compiled mapping is run on.
let golden: (verifyReceipt: JSONValue, serverAPI: [String: JSONValue]) = {
    let seeds = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("FuzzJSON/seeds")
    guard let legacy = FileManager.default.contents(atPath: seeds.appendingPathComponent("golden-verifyReceipt.json").path),
          let server = FileManager.default.contents(atPath: seeds.appendingPathComponent("golden-serverAPI.json").path),
          let legacyValue = try? StrictJSON().parse(legacy), let serverValue = (try? StrictJSON().parse(server))?.objectValue
    else { fatalError("FuzzMappings setup: Fuzz/FuzzJSON/seeds/golden-*.json not found") }
    return (legacyValue, serverValue)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    guard let file = try? MappingFile.parse(bytes, file: "fuzz/v1.json") else { return 0 }
    _ = try? MappingSet([file])
    if let legacy = try? LegacyReceiptNormalizer(file) {
        _ = try? legacy.normalize(verifyReceiptResponse: golden.verifyReceipt)
    }
    if let server = try? ServerAPINormalizer(file) {
        for transaction in golden.serverAPI["transactions"]?.arrayValue ?? [] {
            _ = try? server.normalizeReporting(transaction: transaction)
        }
        for renewal in golden.serverAPI["renewalInfo"]?.arrayValue ?? [] {
            _ = try? server.normalizeReporting(renewalInfo: renewal)
        }
        if let app = golden.serverAPI["appTransaction"] { _ = try? server.normalizeReporting(appTransaction: app) }
    }
    return 0
}
