import IAPCore

/// How the models of signed payloads are decoded: by `JSONValueDecoding`, as strictly as
/// `JSONFields` reads, with every integer member named `…Date` held to `PayloadDates.validMs`.
/// Apple names each timestamp it documents so (`purchaseDate`, `signedDate`, `gracePeriodExpiresDate`,
/// `tokenCreationDate`) and no other integer: bounding by the name means a date member added to a
/// model later is bounded without anyone remembering to, before any arithmetic can touch it.
enum PayloadDecoding {
    static func decode<T: Decodable>(_ payload: JSONValue, context: String) throws(VerificationError) -> T {
        try JSONValueDecoding.decode(T.self, from: payload, context: context, checkingIntegers: boundDates)
    }

    private static let boundDates: JSONValueDecoding.IntegerCheck = { (key, ms, path) throws(VerificationError) in
        // By bytes: `hasSuffix` compares Unicode grapheme by grapheme, on every integer member.
        if key.utf8.count >= 4, key.utf8.suffix(4).elementsEqual("Date".utf8) { _ = try PayloadDates.checked(ms, at: path()) }
    }
}
