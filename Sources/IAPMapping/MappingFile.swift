import Foundation
import IAPCore

/// One versioned mapping file (`Mappings/<source>/<version>.json`), decoded, validated and compiled
/// into rule tables once, so normalising a record is a walk over an array, not a re-read of the file.
///
/// Format (see Mappings/README.md):
/// ```json
/// { "source": "verifyReceipt", "version": "v1", "description": "...",
///   "records": { "<kind>": { "target": "transaction", "inherit": ["bundleId"],
///                            "knownDifferences": {"appAppleId": "why"},
///                            "rules": [ {"from": "quantity", "to": "quantity", "convert": "intString"}, ... ] } } }
/// ```
public struct MappingFile: Sendable {
    /// The largest mapping file read: they are small, hand-written tables.
    public static let maxBytes = 256 * 1024

    public let source: String
    public let version: String
    public let description: String?
    /// Where the file came from, for messages.
    public let file: String
    let kinds: [String: CompiledKind]

    /// "verifyReceipt/v1": what every record produced with this file carries as `mappingVersion`.
    public var id: String { "\(source)/\(version)" }
    /// The numeric part of the version ("v12" → 12), for ordering.
    public var versionNumber: Int { Int(version.dropFirst()) ?? 0 }
    public var kindNames: [String] { kinds.keys.sorted() }
    public var ruleCount: Int { kinds.values.reduce(0) { $0 + $1.rules.count } }

    public func target(ofKind kind: String) -> MappingTarget? { kinds[kind]?.target }
    /// Every input field the kind names (mapped, ignored or nested).
    public func declaredFields(kind: String) -> Set<String> { kinds[kind]?.declared ?? [] }
    /// Input fields the kind silences, with the reason the file gives.
    public func ignoredFields(kind: String) -> [String: String] { kinds[kind]?.ignored ?? [:] }
    /// Canonical fields that this source fills differently from the other generation (or not at
    /// all), with the file's reason: a migration comparison does not count them as disagreements.
    public func knownDifferences(kind: String) -> [String: String] { kinds[kind]?.knownDifferences ?? [:] }

    public static func load(contentsOf url: URL) throws(VerificationError) -> MappingFile {
        let data: Data
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            data = try handle.read(upToCount: maxBytes + 1) ?? Data()
        } catch {
            throw VerificationError(.invalidMapping, "\(url.path): cannot be read")
        }
        return try parse(data, file: url.path)
    }

    public static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes, file: String) throws(VerificationError) -> MappingFile {
        guard bytes.count <= maxBytes else {
            throw VerificationError(.invalidMapping, "\(file): larger than \(maxBytes) bytes")
        }
        let json: JSONValue
        do {
            json = try StrictJSON(maxBytes: maxBytes, maxDepth: 16).parse(bytes)
        } catch {
            throw VerificationError(.invalidMapping, "\(file): \(error.code.rawValue): \(error.message)")
        }
        return try MappingFileCompiler(file: file).compile(json)
    }
}

/// One rule, compiled: slots are indexes into the target schema.
struct CompiledRule: Sendable {
    enum Action: Sendable {
        case assign(MappingConversion, EnumTable?, slots: [Int])
        case flag
        case ignore
        case nested(kind: String)
        case constant(MappedValue, slots: [Int])
    }
    struct Assignment: Sendable {
        let slot: Int
        let value: MappedValue
    }
    let from: String?
    let action: Action
    /// Extra assignments made when the rule fires (value present; for `flag`, when true).
    let sets: [Assignment]
}

/// One record kind, compiled.
struct CompiledKind: Sendable {
    let name: String
    let target: MappingTarget
    let schema: TargetSchema
    let rules: [CompiledRule]
    let declared: Set<String>
    let ignored: [String: String]
    let inherit: [(name: String, slot: Int)]
    let knownDifferences: [String: String]
    /// Input field → nested kind.
    let nested: [String: String]
}

/// Turns decoded JSON into a `MappingFile`, refusing anything it does not understand with the file,
/// the place (kind and rule index) and the reason.
private struct MappingFileCompiler {
    let file: String

    func fail(_ place: String, _ reason: String) -> VerificationError {
        VerificationError(.invalidMapping, "\(file): \(place): \(reason)")
    }

    func object(_ v: JSONValue?, _ place: String) throws(VerificationError) -> [String: JSONValue] {
        guard case .object(let o)? = v else { throw fail(place, "must be an object") }
        return o
    }

    func string(_ v: JSONValue?, _ place: String) throws(VerificationError) -> String {
        guard case .string(let s)? = v, !s.isEmpty else { throw fail(place, "must be a non-empty string") }
        return s
    }

    func onlyKeys(_ o: [String: JSONValue], _ allowed: Set<String>, _ place: String) throws(VerificationError) {
        if let extra = o.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw fail(place, "unknown key \"\(extra)\"")
        }
    }

    func compile(_ json: JSONValue) throws(VerificationError) -> MappingFile {
        let top = try object(json, "top level")
        try onlyKeys(top, ["source", "version", "description", "records"], "top level")
        guard top["source"] != nil else { throw fail("top level", "missing \"source\"") }
        guard top["version"] != nil else { throw fail("top level", "missing \"version\"") }
        let source = try string(top["source"], "source")
        guard source.utf8.allSatisfy({ isNameByte($0) }) else { throw fail("source", "only letters, digits, - and _") }
        let version = try string(top["version"], "version")
        guard version.hasPrefix("v"), let n = Int(version.dropFirst()), n > 0, "v\(n)" == version else {
            throw fail("version", "must be v1, v2, ... (found \"\(version.prefix(32))\")")
        }
        var description: String?
        if let d = top["description"] { description = try string(d, "description") }
        let records = try object(top["records"], "records")
        guard !records.isEmpty else { throw fail("records", "declares no record kinds") }

        var kinds: [String: CompiledKind] = [:]
        for name in records.keys.sorted() {
            kinds[name] = try compileKind(name, records[name]!, kindNames: Set(records.keys))
        }
        return MappingFile(source: source, version: version, description: description, file: file, kinds: kinds)
    }

    func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x5F
    }

    func compileKind(_ name: String, _ json: JSONValue, kindNames: Set<String>) throws(VerificationError) -> CompiledKind {
        let place = "records.\(name)"
        let o = try object(json, place)
        try onlyKeys(o, ["target", "inherit", "knownDifferences", "rules", "description"], place)
        let targetName = try string(o["target"], "\(place).target")
        guard let target = MappingTarget(rawValue: targetName) else {
            throw fail("\(place).target", "unknown target \"\(targetName.prefix(64))\"")
        }
        let schema = target.schema

        var inherit: [(name: String, slot: Int)] = []
        if let list = o["inherit"] {
            guard case .array(let items) = list else { throw fail("\(place).inherit", "must be an array") }
            for (i, item) in items.enumerated() {
                let field = try string(item, "\(place).inherit[\(i)]")
                guard let slot = schema.index[field] else {
                    throw fail("\(place).inherit[\(i)]", "unknown \(target.rawValue) field \"\(field.prefix(64))\"")
                }
                inherit.append((field, slot))
            }
        }

        var knownDifferences: [String: String] = [:]
        if let kd = o["knownDifferences"] {
            for (field, reason) in try object(kd, "\(place).knownDifferences") {
                guard schema.index[field] != nil else {
                    throw fail("\(place).knownDifferences", "unknown \(target.rawValue) field \"\(field.prefix(64))\"")
                }
                knownDifferences[field] = try string(reason, "\(place).knownDifferences.\(field)")
            }
        }

        guard case .array(let ruleItems)? = o["rules"] else { throw fail("\(place).rules", "must be an array") }
        var rules: [CompiledRule] = []
        var declared: Set<String> = []
        var ignored: [String: String] = [:]
        var nested: [String: String] = [:]
        for (i, item) in ruleItems.enumerated() {
            let (rule, knownDifference) = try compileRule(item, place: "\(place).rules[\(i)]", schema: schema,
                                                          target: target, kindNames: kindNames)
            if let from = rule.from {
                guard declared.insert(from).inserted else {
                    throw fail("\(place).rules[\(i)]", "duplicate \"from\": \"\(from.prefix(64))\"")
                }
                switch rule.action {
                case .ignore: ignored[from] = item["ignore"]?.stringValue ?? ""
                case .nested(let kind): nested[from] = kind
                default: break
                }
            }
            if let reason = knownDifference.reason {
                for slot in knownDifference.slots { knownDifferences[schema.names[slot]] = reason }
            }
            rules.append(rule)
        }
        return CompiledKind(name: name, target: target, schema: schema, rules: rules, declared: declared,
                            ignored: ignored, inherit: inherit, knownDifferences: knownDifferences, nested: nested)
    }

    func compileRule(_ json: JSONValue, place basePlace: String, schema: TargetSchema, target: MappingTarget,
                     kindNames: Set<String>) throws(VerificationError) -> (CompiledRule, (reason: String?, slots: [Int])) {
        let o = try object(json, basePlace)
        var place = basePlace
        var from: String?
        if let f = o["from"] {
            from = try string(f, "\(place).from")
            place += " (from \"\(from!.prefix(64))\")"
        }
        try onlyKeys(o, ["from", "to", "convert", "values", "value", "set", "ignore", "nested", "knownDifference", "note"], place)
        var knownDifference: String?
        if let kd = o["knownDifference"] { knownDifference = try string(kd, "\(place).knownDifference") }
        if let note = o["note"] { _ = try string(note, "\(place).note") }

        func forbid(_ keys: [String], _ why: String) throws(VerificationError) {
            if let k = keys.first(where: { o[$0] != nil }) { throw fail(place, "\"\(k)\" is not allowed \(why)") }
        }
        // `where` is a keyword.
        // swift-format-ignore: AlwaysUseLowerCamelCase
        func slot(_ field: String, _ where_: String) throws(VerificationError) -> Int {
            guard let s = schema.index[field] else {
                throw fail(place, "unknown \(target.rawValue) field \"\(field.prefix(64))\" in \"\(where_)\"")
            }
            return s
        }
        // `where` is a keyword.
        // swift-format-ignore: AlwaysUseLowerCamelCase
        func literal(_ v: JSONValue, for slot: Int, _ where_: String) throws(VerificationError) -> MappedValue {
            guard let value = MappedValue(literal: v), value.type == schema.types[slot] else {
                throw fail(place, "\"\(where_)\" must be a \(schema.types[slot].rawValue) for \(schema.names[slot])")
            }
            return value
        }

        var sets: [CompiledRule.Assignment] = []
        if let s = o["set"] {
            for (field, v) in try object(s, "\(place).set").sorted(by: { $0.key < $1.key }) {
                let target = try slot(field, "set")
                sets.append(.init(slot: target, value: try literal(v, for: target, "set.\(field)")))
            }
        }

        if o["ignore"] != nil {
            _ = try string(o["ignore"], "\(place).ignore")
            try forbid(["to", "convert", "values", "value", "set", "nested"], "on an ignored field")
            guard let from else { throw fail(place, "an ignore rule needs \"from\"") }
            return (CompiledRule(from: from, action: .ignore, sets: []), (knownDifference, []))
        }
        if let n = o["nested"] {
            let kind = try string(n, "\(place).nested")
            try forbid(["to", "convert", "values", "value", "set"], "on a nested record")
            guard kindNames.contains(kind) else { throw fail(place, "nested kind \"\(kind.prefix(64))\" is not declared") }
            guard let from else { throw fail(place, "a nested rule needs \"from\"") }
            return (CompiledRule(from: from, action: .nested(kind: kind), sets: []), (knownDifference, []))
        }

        let convertName = try string(o["convert"], "\(place).convert")
        guard let conversion = MappingConversion(rawValue: convertName) else {
            throw fail(place, "unknown conversion \"\(convertName.prefix(64))\"; known: "
                       + MappingConversion.allCases.map(\.rawValue).joined(separator: ", "))
        }
        var slots: [Int] = []
        switch o["to"] {
        case nil: break
        case .string(let field)?: slots = [try slot(field, "to")]
        case .array(let fields)?:
            for f in fields { slots.append(try slot(try string(f, "\(place).to"), "to")) }
        default: throw fail(place, "\"to\" must be a field name or a list of them")
        }
        if conversion != .enum { try forbid(["values"], "without convert \"enum\"") }
        if conversion != .constant { try forbid(["value"], "without convert \"constant\"") }

        switch conversion {
        case .flag:
            try forbid(["to"], "on a flag (it writes only its \"set\")")
            guard from != nil else { throw fail(place, "a flag needs \"from\"") }
            guard !sets.isEmpty else { throw fail(place, "a flag needs \"set\"") }
            return (CompiledRule(from: from, action: .flag, sets: sets), (knownDifference, sets.map(\.slot)))
        case .constant:
            try forbid(["from", "set"], "on a constant")
            guard !slots.isEmpty, let v = o["value"] else { throw fail(place, "a constant needs \"to\" and \"value\"") }
            let value = try literal(v, for: slots[0], "value")
            for s in slots where schema.types[s] != value.type {
                throw fail(place, "\"value\" must be a \(schema.types[s].rawValue) for \(schema.names[s])")
            }
            return (CompiledRule(from: nil, action: .constant(value, slots: slots), sets: []), (knownDifference, slots))
        default:
            guard from != nil else { throw fail(place, "missing \"from\"") }
            guard !slots.isEmpty else { throw fail(place, "missing \"to\" (or \"ignore\" to silence the field)") }
            var table: EnumTable?
            let output: RecordFieldType
            if conversion == .enum {
                output = schema.types[slots[0]]
                var values: [String: MappedValue] = [:]
                for (raw, v) in try object(o["values"], "\(place).values") {
                    values[raw] = try literal(v, for: slots[0], "values.\(raw)")
                }
                table = EnumTable(values: values, output: output)
            } else {
                output = conversion.output!
            }
            for s in slots where schema.types[s] != output {
                throw fail(place, "convert \"\(conversion.rawValue)\" yields a \(output.rawValue) but \(schema.names[s]) is a \(schema.types[s].rawValue)")
            }
            return (CompiledRule(from: from, action: .assign(conversion, table, slots: slots), sets: sets),
                    (knownDifference, slots))
        }
    }
}
