/// The one way a refusal message (or a record support reads) quotes what a client sent, or what
/// evidence it sent says: a bounded, printable excerpt. The message goes back to the client and into
/// logs and pages; echoed raw it would carry control characters, invisible format characters
/// (U+2063) and markup to whoever reads it there.
public enum ClientExcerpt {
    /// The longest excerpt a message quotes.
    public static let defaultLimit = 64

    /// The first `limit` characters of `text`, each kept when it is printable ASCII other than a
    /// quote, backslash, apostrophe, backtick or markup (`<`, `>`, `&`), else written `?`.
    public static func of(_ text: some StringProtocol, limit: Int = defaultLimit) -> String {
        String(text.unicodeScalars.prefix(max(0, limit)).map { kept($0) ? Character($0) : "?" })
    }

    static func kept(_ scalar: Unicode.Scalar) -> Bool {
        (0x20...0x7E).contains(scalar.value) && !"\"\\'`<>&".unicodeScalars.contains(scalar)
    }
}

extension VerificationError {
    /// UNKNOWN_APP for a bundle id a request named: every route and tool says it the same way.
    public static func unknownApp(_ bundleId: some StringProtocol) -> VerificationError {
        VerificationError(.unknownApp, "no app \(ClientExcerpt.of(bundleId, limit: 200)) is configured")
    }
}
