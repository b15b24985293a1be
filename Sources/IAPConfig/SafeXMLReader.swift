import Foundation
import IAPCore
#if canImport(FoundationXML)
import FoundationXML
#endif

/// An XML element as read by `SafeXMLReader`: name, attributes, child elements, the text directly
/// inside it, and the line where it starts.
struct XMLElementNode {
    var name: String
    var attributes: [String: String]
    var children: [XMLElementNode] = []
    var text = ""
    var line: Int
}

/// Reads configuration XML (plain or property list) without ever loading an entity.
///
/// Why the byte-level guards before the parser: `XMLParser`'s flag only covers *external*
/// entities, and internal ones still expand (billion laughs). A configuration file has no use for
/// a DTD, so any `<!ENTITY` is refused outright, and a DOCTYPE is allowed only where the caller
/// says so (the standard plist one, without an internal subset). The text must be UTF-8 so the
/// guards see what the parser sees (a UTF-16 file would hide `<!ENTITY` from a byte search).
struct SafeXMLReader {
    static let maxDepth = 32
    static let maxElements = 20_000
    static let standardPlistDoctypes: Set<String> = [
        #"plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd""#,
        #"plist PUBLIC "-//Apple Computer//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd""#,
    ]

    let displayName: String
    /// `nil`: no DOCTYPE allowed. Otherwise the root name a DOCTYPE may declare (`plist`).
    let allowedDoctypeRoot: String?

    func read(_ data: Data) throws(VerificationError) -> XMLElementNode {
        try ConfigLimits.checkSize(data, displayName)
        var bytes = data
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        guard !bytes.contains(0), let text = String(data: bytes, encoding: .utf8) else {
            throw configError(displayName, line: nil, path: "", "not UTF-8 text")
        }
        try guardDeclarations(text)
        return try parse(Data(bytes))
    }

    private func line(of range: Range<String.Index>, in text: String) -> Int {
        text[..<range.lowerBound].reduce(1) { $1 == "\n" ? $0 + 1 : $0 }
    }

    private func guardDeclarations(_ text: String) throws(VerificationError) {
        if let r = text.range(of: "<!ENTITY") {
            throw configError(displayName, line: line(of: r, in: text), path: "", "entity declarations are not allowed")
        }
        // Processing instructions have no use here, and FoundationXML on Linux crashes (strlen of
        // NULL) on one without data, such as `<?x?>`: only the leading XML declaration may use `<?`.
        var piSearchFrom = text.startIndex
        if text.hasPrefix("<?xml"), let next = text.dropFirst(5).first, next.isWhitespace,
           let end = text.range(of: "?>") {
            let declaration = text[..<end.lowerBound].lowercased()
            if declaration.contains("encoding"), !declaration.contains("utf-8") {
                throw configError(displayName, line: 1, path: "", "only UTF-8 encoding is accepted")
            }
            piSearchFrom = end.upperBound
        }
        if let r = text.range(of: "<?", range: piSearchFrom..<text.endIndex) {
            throw configError(displayName, line: line(of: r, in: text), path: "",
                              "processing instructions are not allowed (the XML declaration must come first)")
        }
        var searchFrom = text.startIndex
        var doctypes = 0
        while let r = text.range(of: "<!DOCTYPE", range: searchFrom..<text.endIndex) {
            doctypes += 1
            let lineNumber = line(of: r, in: text)
            guard let root = allowedDoctypeRoot, doctypes == 1 else {
                throw configError(displayName, line: lineNumber, path: "", "DOCTYPE is not allowed")
            }
            let end = text[r.upperBound...].firstIndex(of: ">") ?? text.endIndex
            let body = text[r.upperBound..<end]
            // Exactly the standard one: a SYSTEM identifier of our choosing would point libxml2 at
            // an external DTD whose entities `&name;` could then pull in.
            let normalized = body.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            guard root == "plist", Self.standardPlistDoctypes.contains(normalized) else {
                throw configError(displayName, line: lineNumber, path: "",
                                  "only the standard \(root) DOCTYPE, without an internal subset, is allowed")
            }
            searchFrom = end
        }
    }

    private func parse(_ data: Data) throws(VerificationError) -> XMLElementNode {
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.shouldProcessNamespaces = false
        parser.shouldReportNamespacePrefixes = false
        let builder = TreeBuilder()
        parser.delegate = builder
        let ok = parser.parse()
        if let refusal = builder.refusal {
            throw configError(displayName, line: refusal.line, path: "", refusal.reason)
        }
        // XMLParser can report success on malformed input: any error is the authority, and the
        // first one (libxml2 goes on and may end with a less telling one) says where it went wrong.
        if !ok || parser.parserError != nil || builder.firstError != nil {
            let first = builder.firstError
            let error = (first?.error ?? parser.parserError) as NSError?
            let line = first?.line ?? (parser.lineNumber > 0 ? parser.lineNumber : nil)
            throw configError(displayName, line: line, path: "", error.map(Self.describe) ?? "malformed XML")
        }
        guard let root = builder.root, builder.stack.isEmpty else {
            throw configError(displayName, line: nil, path: "", "no root element")
        }
        return root
    }

    /// The parser error's code is libxml2's `xmlParserErrors` number (swift-corelibs-foundation's
    /// `XMLParser.ErrorCode` enum is numbered differently on Linux, so it is not used to read it).
    static func describe(_ error: NSError) -> String {
        switch error.code {
        case 76: return "mismatched tag"
        case 77, 37: return "unfinished tag or entity"
        case 5: return "content after the root element"
        case 3, 4: return "not an XML document"
        case 23, 26, 27, 28, 89: return "entity references other than &lt; &gt; &amp; &quot; &apos; are not allowed"
        case 38...42: return "malformed attribute"
        case 6...9: return "invalid character"
        default: return "malformed XML (libxml2 error \(error.code))"
        }
    }
}

/// Collects elements into a tree; refuses any entity or DTD event the byte guards might have missed.
private final class TreeBuilder: NSObject, XMLParserDelegate {
    var stack: [XMLElementNode] = []
    var root: XMLElementNode?
    var refusal: (line: Int?, reason: String)?
    var firstError: (error: Error, line: Int?)?
    private var elementCount = 0

    private func refuse(_ parser: XMLParser, _ reason: String) {
        if refusal == nil { refusal = (parser.lineNumber > 0 ? parser.lineNumber : nil, reason) }
        parser.abortParsing()
    }

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
        guard refusal == nil else { return }
        elementCount += 1
        guard stack.count < SafeXMLReader.maxDepth, elementCount <= SafeXMLReader.maxElements else {
            return refuse(parser, "nested too deeply or too many elements")
        }
        guard root == nil || !stack.isEmpty else { return refuse(parser, "content after the root element") }
        stack.append(XMLElementNode(name: elementName, attributes: attributeDict, line: parser.lineNumber))
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
        guard refusal == nil, let done = stack.popLast() else { return }
        if stack.isEmpty { root = done } else { stack[stack.count - 1].children.append(done) }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard refusal == nil, !stack.isEmpty else { return }
        stack[stack.count - 1].text += string
    }

    // XMLParserDelegate's own parameter name.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
        guard refusal == nil, !stack.isEmpty else { return }
        guard let s = String(data: CDATABlock, encoding: .utf8) else { return refuse(parser, "CDATA is not UTF-8") }
        stack[stack.count - 1].text += s
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: Error) {
        if firstError == nil { firstError = (parseError, parser.lineNumber > 0 ? parser.lineNumber : nil) }
    }

    func parser(_ parser: XMLParser, foundInternalEntityDeclarationWithName name: String, value: String?) {
        refuse(parser, "entity declarations are not allowed")
    }

    func parser(_ parser: XMLParser, foundExternalEntityDeclarationWithName name: String, publicID: String?, systemID: String?) {
        refuse(parser, "entity declarations are not allowed")
    }

    func parser(_ parser: XMLParser, foundUnparsedEntityDeclarationWithName name: String, publicID: String?,
                systemID: String?, notationName: String?) {
        refuse(parser, "entity declarations are not allowed")
    }

    func parser(_ parser: XMLParser, resolveExternalEntityName name: String, systemID: String?) -> Data? {
        refuse(parser, "external entities are not allowed")
        return nil
    }
}

enum ConfigLimits {
    /// No configuration file needs more; a bigger one is a mistake or an attack.
    static let maxFileBytes = 1 << 20

    static func checkSize(_ data: Data, _ displayName: String) throws(VerificationError) {
        guard data.count <= maxFileBytes else {
            throw VerificationError(.inputTooLarge, "\(displayName): \(data.count) bytes exceeds the \(maxFileBytes)-byte limit for a configuration file")
        }
    }
}
