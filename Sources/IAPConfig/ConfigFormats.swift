import Foundation
import IAPCore

/// The two spellings of one configuration schema. Both readers return the same `ConfigNode` tree
/// for the same settings; nothing after them knows which format a file was in.
public enum ConfigFormat: String, Sendable, CaseIterable {
    /// `<bundleId>.plist`: an XML property list (`<dict><key>…</key><string>…</string>…`).
    case plist
    /// `<bundleId>.xml`: plain XML, one element per key (see Config/README.md).
    case xml

    /// Reads a file's bytes into the generic tree. `rootElement` names the plain-XML root
    /// (`app` or `gateway`); a property list's root is always `<plist>`.
    public static func readTree(_ data: Data, format: ConfigFormat, displayName: String,
                                rootElement: String) throws(VerificationError) -> ConfigNode {
        switch format {
        case .plist: return try PlistTreeReader(displayName: displayName).read(data)
        case .xml: return try PlainXMLTreeReader(displayName: displayName, rootElement: rootElement).read(data)
        }
    }
}

/// Strict decimal integer: optional minus sign, digits only (no `0x`, no spaces, no `+`).
func parseConfigInteger(_ text: String) -> Int64? {
    let digits = text.hasPrefix("-") ? text.dropFirst() : Substring(text)
    guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
    return Int64(text)
}

/// An XML property list. `PropertyListSerialization` is the reference parser: the file must be one
/// it reads *as XML* (it also accepts old-style text such as the bare word `garbage`, which is
/// refused). The values are then taken from our own safe XML tree, because it knows line numbers
/// and refuses duplicate keys, which `PropertyListSerialization` silently collapses.
struct PlistTreeReader {
    let displayName: String

    func read(_ data: Data) throws(VerificationError) -> ConfigNode {
        // Guards (size, UTF-8, entities, DOCTYPE) and well-formedness first, so the reference parser
        // only ever sees plain, entity-free XML.
        let root = try SafeXMLReader(displayName: displayName, allowedDoctypeRoot: "plist").read(data)
        guard root.name == "plist" else {
            throw configError(displayName, line: root.line, path: "", "root element must be <plist>, found <\(root.name)>")
        }
        var format = PropertyListSerialization.PropertyListFormat.xml
        do {
            _ = try PropertyListSerialization.propertyList(from: data, options: [], format: &format)
        } catch {
            throw configError(displayName, line: nil, path: "", "not a valid property list")
        }
        guard format == .xml else {
            throw configError(displayName, line: nil, path: "", "not an XML property list")
        }
        guard root.attributes.keys.allSatisfy({ $0 == "version" }), root.children.count == 1,
              isBlank(root.text) else {
            throw configError(displayName, line: root.line, path: "", "<plist> must hold exactly one value")
        }
        return try value(root.children[0], path: "")
    }

    private func isBlank(_ s: String) -> Bool { s.allSatisfy(\.isWhitespace) }

    private func fail(_ e: XMLElementNode, _ path: String, _ reason: String) -> VerificationError {
        configError(displayName, line: e.line, path: path, reason)
    }

    private func value(_ e: XMLElementNode, path: String) throws(VerificationError) -> ConfigNode {
        guard e.attributes.isEmpty else { throw fail(e, path, "<\(e.name)> takes no attributes") }
        let isContainer = e.name == "dict" || e.name == "array"
        if isContainer {
            guard isBlank(e.text) else { throw fail(e, path, "text directly inside <\(e.name)>") }
        } else {
            guard e.children.isEmpty else { throw fail(e, path, "<\(e.name)> cannot contain elements") }
        }
        switch e.name {
        case "dict":
            guard e.children.count % 2 == 0 else { throw fail(e, path, "<dict> must alternate <key> and value") }
            var entries: [String: ConfigNode] = [:]
            for i in stride(from: 0, to: e.children.count, by: 2) {
                let keyElement = e.children[i]
                guard keyElement.name == "key", keyElement.children.isEmpty, keyElement.attributes.isEmpty else {
                    throw fail(keyElement, path, "expected <key>, found <\(keyElement.name)>")
                }
                let key = keyElement.text
                let childPath = path.isEmpty ? key : "\(path).\(key)"
                guard entries[key] == nil else { throw fail(keyElement, childPath, "duplicate key") }
                entries[key] = try value(e.children[i + 1], path: childPath)
            }
            return ConfigNode(.dictionary(entries), line: e.line)
        case "array":
            var items: [ConfigNode] = []
            for (i, child) in e.children.enumerated() {
                items.append(try value(child, path: "\(path)[\(i)]"))
            }
            return ConfigNode(.array(items), line: e.line)
        case "string":
            return ConfigNode(.string(e.text), line: e.line)
        case "integer":
            let text = e.text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let i = parseConfigInteger(text) else { throw fail(e, path, "not a decimal 64-bit integer") }
            return ConfigNode(.integer(i), line: e.line)
        case "true", "false":
            guard isBlank(e.text) else { throw fail(e, path, "<\(e.name)/> must be empty") }
            return ConfigNode(.bool(e.name == "true"), line: e.line)
        case "real", "date", "data":
            throw fail(e, path, "<\(e.name)> is not used by this schema")
        default:
            throw fail(e, path, "unknown property list element <\(e.name)>")
        }
    }
}

/// Plain XML: an element per key, its name the key. A scalar's type is written, never guessed
/// (`type="integer"`, `type="bool"`), so a product id of digits stays a string. Elements with
/// child elements are dictionaries unless `type="array"`, whose children are `<item>`s. The root's
/// attributes are string keys (`<app bundleId="…">`). Text is trimmed of surrounding whitespace.
struct PlainXMLTreeReader {
    let displayName: String
    let rootElement: String

    func read(_ data: Data) throws(VerificationError) -> ConfigNode {
        let root = try SafeXMLReader(displayName: displayName, allowedDoctypeRoot: nil).read(data)
        guard root.name == rootElement else {
            throw configError(displayName, line: root.line, path: "", "root element must be <\(rootElement)>, found <\(root.name)>")
        }
        var asDictionary = root
        asDictionary.attributes = [:]
        let body = try value(asDictionary, path: "", declaredType: "dict")
        guard case .dictionary(var entries) = body.value else { return body }
        for (key, text) in root.attributes.sorted(by: { $0.key < $1.key }) {
            guard entries[key] == nil else {
                throw configError(displayName, line: root.line, path: key, "given both as attribute and as element")
            }
            entries[key] = ConfigNode(.string(text), line: root.line)
        }
        return ConfigNode(.dictionary(entries), line: root.line)
    }

    private func fail(_ e: XMLElementNode, _ path: String, _ reason: String) -> VerificationError {
        configError(displayName, line: e.line, path: path, reason)
    }

    private func value(_ e: XMLElementNode, path: String, declaredType: String? = nil) throws(VerificationError) -> ConfigNode {
        var attributes = e.attributes
        let explicitType = declaredType ?? attributes.removeValue(forKey: "type")
        if let extra = attributes.keys.sorted().first { throw fail(e, path, "unexpected attribute \(extra)") }
        let type = explicitType ?? (e.children.isEmpty ? "string" : "dict")
        let text = e.text.trimmingCharacters(in: .whitespacesAndNewlines)
        if type == "dict" || type == "array" {
            guard text.isEmpty else { throw fail(e, path, "text directly inside a \(type == "dict" ? "dictionary" : "array")") }
        } else {
            guard e.children.isEmpty else { throw fail(e, path, "a \(type) cannot contain elements") }
        }
        switch type {
        case "dict":
            var entries: [String: ConfigNode] = [:]
            for child in e.children {
                let childPath = path.isEmpty ? child.name : "\(path).\(child.name)"
                guard entries[child.name] == nil else { throw fail(child, childPath, "duplicate key") }
                entries[child.name] = try value(child, path: childPath)
            }
            return ConfigNode(.dictionary(entries), line: e.line)
        case "array":
            var items: [ConfigNode] = []
            for (i, child) in e.children.enumerated() {
                let itemPath = "\(path)[\(i)]"
                guard child.name == "item" else { throw fail(child, itemPath, "array elements must be <item>, found <\(child.name)>") }
                items.append(try value(child, path: itemPath))
            }
            return ConfigNode(.array(items), line: e.line)
        case "string":
            return ConfigNode(.string(text), line: e.line)
        case "integer":
            guard let i = parseConfigInteger(text) else { throw fail(e, path, "not a decimal 64-bit integer") }
            return ConfigNode(.integer(i), line: e.line)
        case "bool":
            guard text == "true" || text == "false" else { throw fail(e, path, "a bool must be true or false") }
            return ConfigNode(.bool(text == "true"), line: e.line)
        default:
            throw fail(e, path, "unknown type \"\(type)\" (string, integer, bool, array, dict)")
        }
    }
}
