import Foundation
import IAPCore

extension NotificationJSON {
    /// `encode(event)`'s exact bytes (sorted keys, slashes unescaped), written directly: JSONEncoder
    /// costs ~30 µs of the ~500 µs of CPU each accepted notification costs (profiled: Benchmarks/HISTORY.md), this
    /// a fraction of it. The inbox row must not change with it (`InboxEventJSONTests` compares the
    /// two), so an event holding a fractional number, whose digits are JSONEncoder's own, goes through it.
    static func eventText(_ event: LifecycleEvent) throws(VerificationError) -> String {
        var writer = EncoderCompatibleJSON()
        guard writer.event(event) else { return try encode(event) }
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}

/// JSON text byte for byte as `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` writes
/// it: members in UTF-8 byte order, absent optionals omitted, `\b \t \n \f \r` and `\u00xx` for the
/// other control characters, everything else (`/`, non-ASCII) as is.
struct EncoderCompatibleJSON {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(2048) }

    /// False if the event holds a fractional number (the caller falls back to JSONEncoder).
    mutating func event(_ e: LifecycleEvent) -> Bool {
        // LifecycleEvent's synthesized Codable keys, in byte order.
        bytes += #"{"bundleId":"#.utf8
        string(e.bundleId)
        bytes += #","environment":"#.utf8
        string(e.environment.rawValue)
        bytes += #","id":"#.utf8
        string(e.id)
        bytes += #","notificationType":"#.utf8
        string(e.notificationType.rawValue)
        if let renewal = e.renewal {
            bytes += #","renewal":"#.utf8
            guard record(renewal, Self.renewalMembers) else { return false }
        }
        bytes += #","signedDate":"#.utf8
        bytes += String(e.signedDate).utf8
        if let subtype = e.subtype {
            bytes += #","subtype":"#.utf8
            string(subtype.rawValue)
        }
        if let transaction = e.transaction {
            bytes += #","transaction":"#.utf8
            guard record(transaction, Self.transactionMembers) else { return false }
        }
        bytes.append(UInt8(ascii: "}"))
        return true
    }

    /// A record's members (its field table, `source`, `mappingVersion`: what its Codable form
    /// holds, `CanonicalJSONTests`), sorted once; each name already written as `"name":`.
    private struct Member<R: CanonicalRecord> {
        let key: [UInt8]
        let read: @Sendable (R) -> JSONValue?

        static func sorted() -> [Member] {
            let own: [(name: String, read: @Sendable (R) -> JSONValue?)] = [
                ("source", { .string($0.source) }), ("mappingVersion", { .string($0.mappingVersion) }),
            ]
            let members = R.fields.map { (name: $0.name, read: $0.read) } + own
            return members.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }.map { member in
                var key = EncoderCompatibleJSON()
                key.string(member.name)
                return Member(key: key.bytes + [UInt8(ascii: ":")], read: member.read)
            }
        }
    }

    private static let transactionMembers = Member<CanonicalTransaction>.sorted()
    private static let renewalMembers = Member<CanonicalRenewal>.sorted()

    private mutating func record<R: CanonicalRecord>(_ r: R, _ members: [Member<R>]) -> Bool {
        var separator = UInt8(ascii: "{")
        for member in members {
            guard let value = member.read(r) else { continue }
            bytes.append(separator)
            separator = UInt8(ascii: ",")
            bytes += member.key
            guard self.value(value) else { return false }
        }
        if separator == UInt8(ascii: "{") { bytes.append(separator) }
        bytes.append(UInt8(ascii: "}"))
        return true
    }

    private mutating func value(_ v: JSONValue) -> Bool {
        switch v {
        case .null: bytes += "null".utf8
        case .bool(let b): bytes += (b ? "true" : "false").utf8
        case .int(let i): bytes += String(i).utf8
        case .double: return false
        case .string(let s): string(s)
        case .array(let items):
            bytes.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                guard value(item) else { return false }
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (i, key) in members.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                string(key)
                bytes.append(UInt8(ascii: ":"))
                guard value(members[key]!) else { return false }
            }
            bytes.append(UInt8(ascii: "}"))
        }
        return true
    }

    mutating func string(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { (utf8) in
            // Escapes are ASCII, so UTF-8 is walked byte by byte; most strings (ids, dates) need none.
            guard utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                return bytes.append(contentsOf: utf8)
            }
            for b in utf8 {
                switch b {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), b]
                case 0x08: bytes += #"\b"#.utf8
                case 0x09: bytes += #"\t"#.utf8
                case 0x0A: bytes += #"\n"#.utf8
                case 0x0C: bytes += #"\f"#.utf8
                case 0x0D: bytes += #"\r"#.utf8
                case ..<0x20: bytes += #"\u00"#.utf8 + [Self.hex[Int(b >> 4)], Self.hex[Int(b & 0xF)]]
                default: bytes.append(b)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hex = Array("0123456789abcdef".utf8)
}

/// The model's Codable form with sorted keys, so equal values are equal text.
enum NotificationJSON {
    static func encode<T: Encodable>(_ value: T) throws(VerificationError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value), let text = String(data: data, encoding: .utf8) else {
            throw VerificationError(.internalError, "storage: a value could not be encoded as JSON")
        }
        return text
    }

    static func decode<T: Decodable>(_ type: T.Type, _ json: String) throws(VerificationError) -> T {
        guard let value = try? JSONDecoder().decode(type, from: Data(json.utf8)) else { throw SQLRow.corrupt }
        return value
    }
}
