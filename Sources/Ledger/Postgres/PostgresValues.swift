import CLibPQ
import Foundation
import IAPCore
import Synchronization

/// Statement parameters in libpq's form: one buffer holds every value; each text value ends with
/// NUL, and the buffer is never empty, so an empty blob still has a non-null pointer (a null pointer
/// means SQL NULL to libpq).
struct PostgresParameters {
    private var buffer: [UInt8] = [0]
    private var offsets: [Int?] = []
    private var lengths: [Int32] = []
    private var formats: [Int32] = []

    init() {}

    init(_ arguments: [SQLValue]) throws(VerificationError) {
        buffer = []
        for argument in arguments {
            switch argument {
            case .null:
                offsets.append(nil); lengths.append(0); formats.append(0)
            case .integer(let value):
                offsets.append(buffer.count); buffer.append(contentsOf: String(value).utf8); buffer.append(0)
                lengths.append(0); formats.append(0)
            case .text(let value):
                // A text parameter is read up to its first NUL: "id\0x" would silently become "id",
                // another key. PostgreSQL text cannot hold NUL anyway, so it is refused.
                guard !value.utf8.contains(0) else {
                    throw VerificationError(.internalError, "storage: bind failed (text with a NUL character)")
                }
                offsets.append(buffer.count); buffer.append(contentsOf: value.utf8); buffer.append(0)
                lengths.append(0); formats.append(0)
            case .blob(let value):
                offsets.append(buffer.count); buffer.append(contentsOf: value)
                lengths.append(Int32(value.count)); formats.append(1)
            }
        }
        buffer.append(0)
    }

    /// Calls `body` with the count, values, lengths and formats arrays, valid during the call.
    func withLibPQArrays<R>(_ body: (Int32, [UnsafePointer<CChar>?], [Int32], [Int32]) -> R) -> R {
        buffer.withUnsafeBufferPointer { bytes in
            let base = UnsafeRawPointer(bytes.baseAddress!)
            let values: [UnsafePointer<CChar>?] = offsets.map { offset in
                offset.map { (base + $0).assumingMemoryBound(to: CChar.self) }
            }
            return body(Int32(offsets.count), values, lengths, formats)
        }
    }
}

/// Round trips to the server, counted across a database's connections (tests prove a path's count).
final class RoundTripCounter: Sendable {
    private let value = Atomic<Int>(0)
    var total: Int { value.load(ordering: .relaxed) }
    func count() { value.add(1, ordering: .relaxed) }
}

/// A row of a text-format result.
struct PostgresRow: SQLRowSource {
    let result: OpaquePointer?
    let row: Int32

    func isNull(_ column: Int32) -> Bool { PQgetisnull(result, row, column) == 1 }

    func integer(_ column: Int32) -> Int64? {
        guard let text = text(column) else { return nil }
        return Int64(text)
    }

    func text(_ column: Int32) -> String? {
        guard !isNull(column), let value = PQgetvalue(result, row, column) else { return nil }
        let count = Int(PQgetlength(result, row, column))
        return value.withMemoryRebound(to: UInt8.self, capacity: count) {
            String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
        }
    }

    /// bytea's text output is `\x` and two hex digits per byte (bytea_output = hex, the default
    /// since PostgreSQL 9.0); anything else reads as no value, which the caller treats as corrupt.
    func blob(_ column: Int32) -> Data? {
        guard let text = text(column), text.hasPrefix("\\x") else { return nil }
        return Hex.bytes(String(text.dropFirst(2))).map { Data($0) }
    }
}

/// Keeps C copies of `strings` (and a terminating NULL) alive for the duration of `body`.
func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    return body(copies.map { UnsafePointer($0) } + [nil])
}
