import AppReceipts
import IAPCore

// libFuzzer entry: the same bytes go to every parser of untrusted legacy-receipt input. Each must
// return or throw VerificationError; a crash, hang or sanitizer report is a bug.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    walkDER(bytes)
    _ = try? PKCS7SignedData.parse(bytes)
    _ = try? AppReceipt.parsePayload(bytes)
    _ = try? AppReceipt.parseUnverified(pkcs7: bytes)
    _ = try? OldStylePlist.parseDictionary(bytes)
    _ = try? LegacyTransactionReceipt.parse(plist: bytes)
    _ = try? StrictBase64.decode(String(decoding: bytes, as: UTF8.self))
    return 0
}

/// Visits every element and decodes every primitive as each type the reader knows.
private func walkDER(_ bytes: [UInt8]) {
    func visit(_ reader: inout DERReader) throws(VerificationError) {
        while let element = try reader.next() {
            if element.tag.constructed {
                _ = try? element.octetString()
                var inner = try element.children()
                try visit(&inner)
            } else {
                _ = try? element.integer()
                _ = try? element.objectIdentifier()
                _ = try? element.string()
                _ = try? element.octetString()
            }
        }
    }
    guard var reader = try? DERReader(bytes) else { return }
    try? visit(&reader)
}
