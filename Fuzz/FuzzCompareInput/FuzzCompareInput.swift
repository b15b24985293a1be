// libFuzzer target: `iapgw compare` input. The bytes as the JSONL backlog (`{"receipt","account"?}`
// per line, strict: unknown or duplicate keys, wrong types and empty receipts refused with the line
// number), each receipt's resume key, and each line as a line of the batch's state file (a torn or
// foreign line is skipped, and what is read writes back the same). Any outcome but a VerificationError or a value is a bug.
// Seeds: a backlog of Apple's real receipts (Scripts/fuzz.sh). Run: Scripts/fuzz.sh 60 FuzzCompareInput
import Foundation
@testable import Gateway
import IAPCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    if let backlog = try? BatchReceipt.parseJSONLines(bytes) {
        for receipt in backlog { _ = receipt.evidenceSHA256 }
    }
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
        // What the state file reads back must be what it would write: a resumed batch skips exactly
        // the receipts it recorded, with the outcome it recorded.
        if let record = BatchRecord(line: line) {
            precondition(BatchRecord(line: Substring(record.line)) == record, "a state line does not read back as written")
        }
    }
    return 0
}
