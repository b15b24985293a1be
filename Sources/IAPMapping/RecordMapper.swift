import IAPCore

// Applying a compiled kind to one input object. Rules run in file order and a later assignment to
// the same canonical field overwrites an earlier one: the file order is the precedence (so an offer
// code's offerType 3 can win over the introductory flag of the same legacy entry).

/// What normalising one record produced besides the record: input fields no rule names.
public struct Mapped<Record: Sendable>: Sendable {
    public var record: Record
    /// Input field names the mapping file does not declare (neither mapped nor ignored), as
    /// "kind.field", sorted. Recorded rather than refused so a field Apple adds does not stop
    /// verification; a file lists a field as `ignore` to silence it.
    public var unmappedFields: [String]
}

extension CompiledKind {
    /// Converts `object` into slot values. `path` names the record in errors ("in_app[2]"),
    /// `inherited` holds values from the enclosing records by canonical field name.
    func apply(_ object: [String: JSONValue], path: String, inherited: [String: MappedValue] = [:],
               unmapped: inout Set<String>) throws(VerificationError) -> [MappedValue?] {
        var slots = [MappedValue?](repeating: nil, count: schema.names.count)
        for rule in rules {
            if case .constant(let value, let targets) = rule.action {
                for slot in targets { slots[slot] = value }
                continue
            }
            guard let from = rule.from, let raw = object[from], raw != .null else { continue }
            switch rule.action {
            case .assign(let conversion, let table, let targets):
                let value = try conversion.convert(raw, table: table, path: "\(path).\(from)")
                for slot in targets { slots[slot] = value }
                for set in rule.sets { slots[set.slot] = set.value }
            case .flag:
                if try MappingConversion.flag.convert(raw, table: nil, path: "\(path).\(from)") == .bool(true) {
                    for set in rule.sets { slots[set.slot] = set.value }
                }
            case .nested:
                // Normalised by the caller; only the shape is checked here.
                switch raw {
                case .object: break
                case .array(let items) where items.allSatisfy({ $0.objectValue != nil }): break
                default:
                    throw VerificationError(.invalidFieldType, "\(path).\(from) must be an object or an array of objects")
                }
            case .ignore, .constant:
                break
            }
        }
        for (name, slot) in inherit where slots[slot] == nil {
            slots[slot] = inherited[name]
        }
        for key in object.keys where !declared.contains(key) {
            unmapped.insert("\(self.name).\(key)")
        }
        for field in schema.required where slots[schema.index[field]!] == nil {
            throw VerificationError(.missingField, "\(path) has no value for \(field)")
        }
        return slots
    }

    /// The slots by canonical name, for passing down as inherited values.
    func named(_ slots: [MappedValue?]) -> [String: MappedValue] {
        var out: [String: MappedValue] = [:]
        for (i, v) in slots.enumerated() { if let v { out[schema.names[i]] = v } }
        return out
    }
}

extension MappingFile {
    /// A normaliser reads only files written for its source.
    func requireSource(_ source: String) throws(VerificationError) {
        guard self.source == source else {
            throw VerificationError(.invalidMapping, "\(file): source \(self.source) is not \(source)")
        }
    }

    /// The compiled kind, checked to exist and to produce `target`: a normaliser calls this once at
    /// init so a file missing a kind it needs is refused before any traffic.
    func requireKind(_ name: String, target: MappingTarget) throws(VerificationError) -> CompiledKind {
        guard let kind = kinds[name] else {
            throw VerificationError(.invalidMapping, "\(file): \(id) has no record kind \"\(name)\"")
        }
        guard kind.target == target else {
            throw VerificationError(.invalidMapping, "\(file): records.\(name) must target \(target.rawValue)")
        }
        return kind
    }

    func object(_ value: JSONValue, _ path: String) throws(VerificationError) -> [String: JSONValue] {
        guard case .object(let o) = value else {
            throw VerificationError(.invalidFieldType, "\(path) must be a JSON object, found \(value.typeName)")
        }
        return o
    }

    func transaction(_ kind: CompiledKind, _ object: [String: JSONValue], path: String,
                     inherited: [String: MappedValue] = [:], unmapped: inout Set<String>) throws(VerificationError) -> CanonicalTransaction {
        let slots = try kind.apply(object, path: path, inherited: inherited, unmapped: &unmapped)
        return buildRecord(CanonicalTransaction(transactionId: "", productId: "", source: source, mappingVersion: id),
                           CanonicalTransaction.fields, slots)
    }

    func renewal(_ kind: CompiledKind, _ object: [String: JSONValue], path: String,
                 inherited: [String: MappedValue] = [:], unmapped: inout Set<String>) throws(VerificationError) -> CanonicalRenewal {
        let slots = try kind.apply(object, path: path, inherited: inherited, unmapped: &unmapped)
        return buildRecord(CanonicalRenewal(originalTransactionId: "", source: source, mappingVersion: id),
                           CanonicalRenewal.fields, slots)
    }

    func appTransaction(_ kind: CompiledKind, slots: [MappedValue?]) -> CanonicalAppTransaction {
        buildRecord(CanonicalAppTransaction(bundleId: "", source: source, mappingVersion: id),
                    CanonicalAppTransaction.fields, slots)
    }
}

extension MappingFile {
    /// One human-readable line per rule of `kind`, in file order (for `iapgw mappings show`).
    public func ruleLines(kind name: String) -> [String] {
        guard let kind = kinds[name] else { return [] }
        return kind.rules.map { rule in
            let from = rule.from ?? "(constant)"
            let sets = rule.sets.isEmpty ? "" : " set " + rule.sets.map { "\(kind.schema.names[$0.slot])=\($0.value)" }.joined(separator: ",")
            switch rule.action {
            case .assign(let conversion, _, let slots):
                return "\(from) -> \(slots.map { kind.schema.names[$0] }.joined(separator: ",")) (\(conversion.rawValue))\(sets)"
            case .flag: return "\(from) (flag)\(sets)"
            case .ignore: return "\(from) ignored: \(kind.ignored[from] ?? "")"
            case .nested(let nested): return "\(from) nested \(nested)"
            case .constant(let value, let slots):
                return "\(from) -> \(slots.map { kind.schema.names[$0] }.joined(separator: ",")) = \(value)"
            }
        }
    }
}
