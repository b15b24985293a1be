import AppReceipts
import IAPCore
import XCTest

/// A definite-length TLV with a minimal length, for building inputs by hand.
func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
    let n = content.count
    let length: [UInt8] = n < 0x80 ? [UInt8(n)] : n < 0x100 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
    return [tag] + length + content
}

func assertMalformed(_ bytes: [UInt8], _ fragment: String, file: StaticString = #filePath, line: UInt = #line,
                     _ body: ([UInt8]) throws(VerificationError) -> Void) {
    do {
        try body(bytes)
        XCTFail("expected MALFORMED_RECEIPT", file: file, line: line)
    } catch {
        XCTAssertEqual(error.code, .malformedReceipt, file: file, line: line)
        XCTAssertTrue(error.message.contains(fragment), "\(error.message)", file: file, line: line)
    }
}

/// Reads every element recursively, as a fuzzer would.
func walk(_ bytes: [UInt8]) throws(VerificationError) {
    func visit(_ reader: inout DERReader) throws(VerificationError) {
        while let e = try reader.next() {
            guard e.tag.constructed else { continue }
            var inner = try e.children()
            try visit(&inner)
        }
    }
    var reader = try DERReader(bytes)
    try visit(&reader)
}

final class DERReaderTests: XCTestCase {
    func testReadsIntegersOfBothSignsAndRefusesNonMinimalOnes() throws {
        var r = try DERReader(tlv(0x02, [0x00, 0x80]) + tlv(0x02, [0xFF, 0x7F]) + tlv(0x02, [0x01, 0x35, 0x3A, 0x8C, 0x7C, 0x77, 0x0A]))
        XCTAssertEqual(try r.next()?.integer(), 128)
        XCTAssertEqual(try r.next()?.integer(), -129)
        XCTAssertEqual(try r.next()?.integer(), 340000558053130)
        assertMalformed(tlv(0x02, [0x00, 0x01]), "minimally") { b throws(VerificationError) in var r = try DERReader(b); _ = try r.next()!.integer() }
        assertMalformed(tlv(0x02, []), "empty INTEGER") { b throws(VerificationError) in var r = try DERReader(b); _ = try r.next()!.integer() }
        assertMalformed(tlv(0x02, [0x01] + [UInt8](repeating: 0, count: 8)), "64 bits") { b throws(VerificationError) in var r = try DERReader(b); _ = try r.next()!.integer() }
    }

    func testDecodesObjectIdentifiers() throws {
        var r = try DERReader(tlv(0x06, [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]))
        XCTAssertEqual(try r.next()?.objectIdentifier(), "1.2.840.113549.1.7.2")
        assertMalformed(tlv(0x06, [0x2A, 0x86]), "ends inside") { b throws(VerificationError) in var r = try DERReader(b); _ = try r.next()!.objectIdentifier() }
        assertMalformed(tlv(0x06, [0x2A, 0x80, 0x01]), "minimally") { b throws(VerificationError) in var r = try DERReader(b); _ = try r.next()!.objectIdentifier() }
    }

    func testReadsMultiByteTagNumbersAndRefusesNonMinimalTags() throws {
        var r = try DERReader([0xBF, 0x86, 0x2D, 0x00])   // [CONTEXT 813] constructed, empty
        let e = try XCTUnwrap(try r.next())
        XCTAssertEqual(e.tag, DERTag(.contextSpecific, 813, constructed: true))
        assertMalformed([0x9F, 0x05, 0x00], "long-form tag") { b throws(VerificationError) in try walk(b) }
        assertMalformed([0x9F, 0x80, 0x05, 0x00], "tag number not minimally") { b throws(VerificationError) in try walk(b) }
    }

    func testConcatenatesConstructedBEROctetStrings() throws {
        let ber: [UInt8] = [0x24, 0x80] + tlv(0x04, [1, 2]) + [0x24, 0x80] + tlv(0x04, [3]) + [0, 0] + tlv(0x04, [4]) + [0, 0]
        var r = try DERReader(ber)
        XCTAssertEqual(try r.next()?.octetString(), [1, 2, 3, 4])
        XCTAssertTrue(r.isAtEnd)
        assertMalformed([0x24, 0x80] + tlv(0x02, [1]) + [0, 0], "expected OCTET STRING") { b throws(VerificationError) in var r = try DERReader(b); _ = try r.next()!.octetString() }
    }

    func testRefusesTruncatedAndOverflowingLengths() {
        assertMalformed([0x30, 0x05, 0x02, 0x01], "runs past the end") { b throws(VerificationError) in try walk(b) }
        assertMalformed([0x30, 0x84, 0xFF, 0xFF, 0xFF, 0xFF, 0x00], "runs past the end") { b throws(VerificationError) in try walk(b) }
        assertMalformed([0x30, 0x88, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], "length of 8 octets") { b throws(VerificationError) in try walk(b) }
        assertMalformed([0x30, 0x81, 0x05] + [UInt8](repeating: 5, count: 5), "long-form length") { b throws(VerificationError) in try walk(b) }
        assertMalformed([0x30, 0x82, 0x00, 0x81] + [UInt8](repeating: 5, count: 0x81), "not minimally") { b throws(VerificationError) in try walk(b) }
        assertMalformed([0x30], "truncated") { b throws(VerificationError) in try walk(b) }
        assertMalformed([0x30, 0xFF], "length of 127 octets") { b throws(VerificationError) in try walk(b) }
    }

    func testRefusesIndefiniteLengthMisuse() {
        assertMalformed([0x04, 0x80, 0x00, 0x00], "primitive") { b throws(VerificationError) in try walk(b) }
        assertMalformed([0x30, 0x80] + tlv(0x02, [1]), "without end-of-contents") { b throws(VerificationError) in try walk(b) }
        assertMalformed([0x00, 0x00], "end-of-contents") { b throws(VerificationError) in try walk(b) }
        let deep = [UInt8]((0..<5000).flatMap { _ in [0x30, 0x80] }) + [UInt8](repeating: 0, count: 10000)
        assertMalformed(deep, "nesting deeper") { b throws(VerificationError) in try walk(b) }
        let deepDefinite = (0..<100).reduce([UInt8]()) { inner, _ in tlv(0x31, inner) }
        assertMalformed(deepDefinite, "nesting deeper") { b throws(VerificationError) in try walk(b) }
    }

    func testRefusesTrailingDataAfterTheTopElement() throws {
        var r = try DERReader(tlv(0x30, []) + [0x05])
        _ = try r.next()
        XCTAssertThrowsError(try r.finish("ContentInfo")) { XCTAssertEqual(($0 as? VerificationError)?.code, .malformedReceipt) }
    }

    func testRefusesInputOverTheSizeLimit() {
        XCTAssertThrowsError(try DERReader([UInt8](repeating: 0, count: 100), limits: DERLimits(maxInputBytes: 99))) {
            XCTAssertEqual(($0 as? VerificationError)?.code, .inputTooLarge)
        }
    }

    func testStringsAreValidatedForTheirType() throws {
        var r = try DERReader(tlv(0x0C, Array("héllo".utf8)) + tlv(0x16, Array("2024".utf8)))
        XCTAssertEqual(try r.next()?.string(), "héllo")
        XCTAssertEqual(try r.next()?.string(), "2024")
        assertMalformed(tlv(0x0C, [0xC3, 0x28]), "UTF-8") { b throws(VerificationError) in var r = try DERReader(b); _ = try r.next()!.string() }
        assertMalformed(tlv(0x16, [0xE9]), "non-ASCII") { b throws(VerificationError) in var r = try DERReader(b); _ = try r.next()!.string() }
    }
}
