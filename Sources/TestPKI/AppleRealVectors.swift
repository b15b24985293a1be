import Foundation

/// The real Apple-signed vectors in `../shared/testdata/apple-real/` (beside the project root).
/// Tests and benchmarks load them from there and never copy them in. `IAPGW_APPLE_REAL` overrides
/// the directory (e.g. when the checkout is not beside `shared/`).
public enum AppleRealVectors {
    public static var directory: URL {
        if let override = ProcessInfo.processInfo.environment["IAPGW_APPLE_REAL"] {
            return URL(fileURLWithPath: override, isDirectory: true)
        }
        // Sources/TestPKI/AppleRealVectors.swift -> project root -> ../shared/testdata/apple-real
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("shared/testdata/apple-real", isDirectory: true)
    }

    public static func data(_ name: String) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent(name))
    }

    /// A text vector (JWS or base64 receipt) with surrounding whitespace removed.
    public static func text(_ name: String) throws -> String {
        String(decoding: try data(name), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    public static let appleRootG3 = "AppleRootCA-G3.cer"
    public static let appleIncRoot = "AppleIncRootCertificate.cer"
    public static let productionTestNotification = "production-test-notification.jws"
    public static let sandboxConsumableTransaction = "sandbox-consumable-transaction.jws"
    public static let receiptProduction = "receipt-production.b64"
    public static let receiptSandboxG5 = "receipt-sandbox-g5.b64"
    public static let receiptSandboxLegacy = "receipt-sandbox-legacy.b64"
    public static let receiptXcode = "receipt-xcode.b64"
    public static let receiptXcodeWithPurchases = "receipt-xcode-with-purchases.b64"
}
