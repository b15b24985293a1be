import AppleTrust
import XCTest
@testable import Ledger

/// A released migration is never edited: a ledger that ran version N must mean the same as one
/// that runs it now. The SHA-256 of every released version's text, per dialect, as it was released;
/// how the Swift builds a text may change, the text may not.
final class ReleasedMigrationTextTests: XCTestCase {
    private static let released: [SQLDialect: [String]] = [
        .sqlite: [
            "bb38f95d69761dcb1f5a536d45da2c8a88ea8671dcf1dae21638b760ba8fe50c", // v1
            "b7c7addb490762e2ee261c40198c0421cb4c80c2b9baf077775b4fc69f6e5a10", // v2
            "772eba2a6332e21fc62002f08dc6b5f980034fc5e71d67619cd26f82e623ecab", // v3
            "9f4d15d630ec1074c6040bb6bb9bcd8e2b5016316b64cdbc502626e2a74a9718", // v4
            "74abfbd6e92efdbddfee21ce1e1482aad4db380bd48acb7abdb2177f2510903d", // v5
            "9ae438f4dafe849ed179b688672f2674354466f6ec95dd321801f405f046f29f", // v6
            "534a1bc1b920a2263f7a93cfc2f964ef5207f1839b108dff9973b90369bcceaa", // v7
            "b7c79af92c9897c978d917feaa95043e2ad10f861c89facb5b22a5a9592ae671", // v8
            "0a4167d3d581c1c69c034359e8156ce77f70207a3a2485281137500e119ab355", // v9
            "db27512fc3ae12f2097b4dc83db929645f230635395edc2b0848f407185b5a27", // v10
            "3863e2a18fb89825d846092c3bd3ad0fdcc37c4fa78cfe7ac5d2b3dd0d78f4bb", // v11
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", // v12
            "8a1c06ba6586152c1d577e38b93ef269f5933b149cac22ffb03ada9d91dd5a14", // v13
            "cfb8a424f2c4a754c484c53336ad86222fbfd8caaf7282fe724e14a33c51696d", // v14
            "a9da98adbaab46d14e6446be4e8bc2bae338bb2cac2b52883f384b871049cd6a", // v15
            "411f90ccd0dfdf1936a75b47e8c670dc30f884749d4b01467a03e00df0f647f0", // v16
        ],
        .postgres: [
            "0f6ff7abeef8ac1c0dfa7312c69f90729ab07b38c387bd89b91a1ba420025a84", // v1
            "d24b371a66ba4cb8ed03af16691884bd8aa5e181518b1c5bfc17cb9ce3afaf5e", // v2
            "ada1f065ad96d754547d2a86bb5372b1bc2c56c78029935c9de4c3bca37d772b", // v3
            "ab235c20156668e04144632c831fd9f0abd0e41bfe8fbbfd89e12264b8d01e32", // v4
            "74abfbd6e92efdbddfee21ce1e1482aad4db380bd48acb7abdb2177f2510903d", // v5
            "29958052d7971ac71c5f3b3cc7a72309abe47b247dce5435603a6b1efb99d306", // v6
            "534a1bc1b920a2263f7a93cfc2f964ef5207f1839b108dff9973b90369bcceaa", // v7
            "35cfbf0d19747177ea7efc042bb7289551d7923e5217702dd752fa94fa3b3ae8", // v8
            "0a4167d3d581c1c69c034359e8156ce77f70207a3a2485281137500e119ab355", // v9
            "a90ef1bfa11a441384b5c0506dd568da7ca1794c9d300a22b34eed06eb30b4fc", // v10
            "8226e1679c1188155757f4a6c42f0a4c2e5b5e5d6023e40236c02d93c30b08a4", // v11
            "0c76dd0e22bfef22e0a98cb01860229367ca7fab9ddba4d81796592e8beed270", // v12
            "624d471692c6c096de995c6e12f17c6b4ac597648a92315ff03f4e68fe91fd72", // v13
            "cfb8a424f2c4a754c484c53336ad86222fbfd8caaf7282fe724e14a33c51696d", // v14
            "ece7de22099461b631c5eb07b08191a2848ce9255118038a7deae5337607f18d", // v15
            "224b7fbb30a24a57e39ae8857121c05d518a97008a99135a5cca2c5f7c3f10af", // v16
        ],
    ]

    func testEveryReleasedMigrationHasTheTextItWasReleasedWith() {
        for (dialect, pinned) in Self.released {
            let texts = LedgerSchema.migrations(dialect)
            XCTAssertGreaterThanOrEqual(texts.count, pinned.count, "\(dialect): a released version was removed")
            let now = texts.prefix(pinned.count).map(SHA256Digest.lowercaseHex)
            for (index, (was, isNow)) in zip(pinned, now).enumerated() {
                XCTAssertEqual(isNow, was, "\(dialect) v\(index + 1) changed")
            }
        }
    }
}
