import Foundation
import Gateway
import IAPConfig
import IAPCore
import XCTest

/// The receipt seal key from the gateway config (`receiptSealKey`), `IAPGW_RECEIPT_SEAL_KEY` overriding it (issue 15 item 5).
final class ReceiptSealKeyConfigTests: XCTestCase {
    private let postgres = LedgerStorage("postgresql://iapgw@localhost/iapgw")

    func testTheConfiguredKeyServesPostgreSQLAndTheEnvironmentOverridesIt() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("seal-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try (String(repeating: "ab", count: 32) + "\n").write(to: file, atomically: true, encoding: .utf8)
        let configured = SecretReference(.file(file))

        let fromFile = try ReceiptSealKey.load(environment: [:], configured: configured, storage: postgres, logger: .disabled)
        let again = try ReceiptSealKey.load(environment: [:], configured: configured, storage: postgres, logger: .disabled)
        let sealed = try fromFile.seal(Array("receipt".utf8), associatedData: [1])
        XCTAssertEqual(try again.open(sealed, associatedData: [1]), Array("receipt".utf8), "every instance reads the same key")

        let overridden = try ReceiptSealKey.load(environment: ["IAPGW_RECEIPT_SEAL_KEY": String(repeating: "cd", count: 32)],
                                                 configured: configured, storage: postgres, logger: .disabled)
        XCTAssertThrowsError(try overridden.open(sealed, associatedData: [1]), "the environment's key, not the file's")
    }

    func testABadOrMissingKeyIsRefusedWithoutEchoingIt() throws {
        XCTAssertThrowsError(try ReceiptSealKey.load(environment: ["SEAL": "00ff"],
                                                     configured: SecretReference(.environmentVariable("SEAL")),
                                                     storage: postgres, logger: .disabled)) { error in
            let message = (error as? VerificationError)?.message ?? ""
            XCTAssertTrue(message.contains("must be 64 hex digits"), message)
            XCTAssertFalse(message.contains("00ff"), message)
        }
        XCTAssertThrowsError(try ReceiptSealKey.load(environment: [:], storage: postgres, logger: .disabled)) { error in
            XCTAssertTrue(((error as? VerificationError)?.message ?? "").contains("receiptSealKey"), "\(error)")
        }
    }
}
