import IAPCore

/// Standard base64 (RFC 4648 §4) decoded strictly: the standard alphabet only, padding required,
/// unused bits zero. Receipts sometimes arrive line-wrapped, so CR and LF are skipped; any other
/// whitespace or character is MALFORMED_BASE64.
public enum StrictBase64 {
    /// 1 MiB of text: the 187-record legacy sandbox receipt is about 105 KB.
    public static let defaultMaxInputBytes = 1 << 20

    public static func decode(_ text: String, maxInputBytes: Int = defaultMaxInputBytes) throws(VerificationError) -> [UInt8] {
        let utf8 = text.utf8
        guard utf8.count <= maxInputBytes else {
            throw VerificationError(.inputTooLarge, "base64 input of \(utf8.count) bytes exceeds \(maxInputBytes)")
        }
        // One pass over contiguous UTF-8 through a table (a receipt is ~100 KB of text, and the
        // character-by-character `enumerated()` walk cost more than parsing the DER it encodes).
        var text = text
        let result: Result<[UInt8], VerificationError> = text.withUTF8 { input in
            do throws(VerificationError) { return .success(try decode(input)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Symbol values: 0...63 for the alphabet, `pad` for "=", `skip` for CR/LF, `bad` otherwise.
    private static let pad: UInt8 = 64, skip: UInt8 = 65, bad: UInt8 = 0xFF
    private static let table: [UInt8] = {
        var t = [UInt8](repeating: bad, count: 256)
        for c in 0...255 { if let v = value(of: UInt8(c)) { t[c] = v } }
        t[0x3D] = pad
        t[0x0D] = skip
        t[0x0A] = skip
        return t
    }()

    /// The same table pre-shifted for each position of a group of four, so a group decodes with
    /// four lookups and three ORs; anything but a data symbol sets a bit in the top byte.
    private static let groupTables: [UInt32] = {
        var t = [UInt32](repeating: 0xFF00_0000, count: 4 * 256)
        for c in 0..<256 where table[c] < pad {
            let v = UInt32(table[c])
            t[c] = v << 18
            t[256 + c] = v << 12
            t[512 + c] = v << 6
            t[768 + c] = v
        }
        return t
    }()

    private enum Failure { case badCharacter(Int), empty, length(Int), misplacedPadding, unusedBits }

    /// One pass: symbols are decoded as they are met; the checks and their order (bad character
    /// first, then emptiness, length, padding placement, unused bits) are those of the rules above.
    private static func decode(_ input: UnsafeBufferPointer<UInt8>) throws(VerificationError) -> [UInt8] {
        var failure: Failure?
        let out = table.withUnsafeBufferPointer { t in groupTables.withUnsafeBufferPointer { g in
            [UInt8](unsafeUninitializedCapacity: input.count / 4 * 3 + 3) { o, initialized in
                var acc: UInt32 = 0, pending = 0, symbols = 0, padding = 0, j = 0
                var dataAfterPadding = false
                var index = 0
                let n = input.count
                while index < n {
                    if pending == 0 && padding == 0, n > 0 {
                        let groupStart = index
                        // Whole groups of four data symbols (the bulk of any input) in one step.
                        // Raw pointers: the bounds are established by the loop condition. Each
                        // group is stored as 4 bytes whose last is overwritten by the next group
                        // or lies past `initialized`: j + 4 <= capacity holds for every group.
                        let inp = input.baseAddress!, out = UnsafeMutableRawPointer(o.baseAddress!)
                        let g0 = g.baseAddress!, g1 = g0 + 256, g2 = g0 + 512, g3 = g0 + 768
                        while index &+ 4 <= n {
                            let v = g0[Int(inp[index])] | g1[Int(inp[index &+ 1])]
                                | g2[Int(inp[index &+ 2])] | g3[Int(inp[index &+ 3])]
                            guard v & 0xFF00_0000 == 0 else { break }
                            out.storeBytes(of: (v << 8).bigEndian, toByteOffset: j, as: UInt32.self)
                            j &+= 3
                            index &+= 4
                        }
                        symbols &+= index - groupStart
                        if index >= n { break }
                    }
                    let v = t[Int(input[index])]
                    if v < pad {
                        if padding > 0 { dataAfterPadding = true; padding = 0 }
                        acc = acc << 6 | UInt32(v)
                        pending += 1
                        symbols += 1
                        if pending == 4 {
                            o[j] = UInt8(truncatingIfNeeded: acc >> 16)
                            o[j + 1] = UInt8(truncatingIfNeeded: acc >> 8)
                            o[j + 2] = UInt8(truncatingIfNeeded: acc)
                            j += 3
                            acc = 0
                            pending = 0
                        }
                    } else if v == pad {
                        padding += 1
                        symbols += 1
                    } else if v != skip {
                        failure = .badCharacter(index)
                        return
                    }
                    index += 1
                }
                if symbols == 0 { failure = .empty; return }
                if symbols % 4 != 0 { failure = .length(symbols); return }
                if padding > 2 || dataAfterPadding { failure = .misplacedPadding; return }
                // Here `pending` == 4 - padding (mod 4): the data symbols of the last group.
                if padding == 2 {
                    guard acc & 0x0F == 0 else { failure = .unusedBits; return }
                    o[j] = UInt8(truncatingIfNeeded: acc >> 4)
                    j += 1
                } else if padding == 1 {
                    guard acc & 0x03 == 0 else { failure = .unusedBits; return }
                    o[j] = UInt8(truncatingIfNeeded: acc >> 10)
                    o[j + 1] = UInt8(truncatingIfNeeded: acc >> 2)
                    j += 2
                }
                initialized = j
            }
        } }
        switch failure {
        case nil: return out
        case .badCharacter(let index):
            throw VerificationError(.malformedBase64, "character at offset \(index) is not standard base64")
        case .empty: throw VerificationError(.malformedBase64, "empty base64 input")
        case .length(let count):
            throw VerificationError(.malformedBase64, "base64 length \(count) is not a multiple of 4 (padding required)")
        case .misplacedPadding: throw VerificationError(.malformedBase64, "misplaced base64 padding")
        case .unusedBits: throw VerificationError(.malformedBase64, "non-zero unused bits before padding")
        }
    }

    private static func value(of c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
