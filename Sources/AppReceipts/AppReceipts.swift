// Legacy App Store receipts: a strict BER/DER reader, the PKCS#7 receipt payload, signature
// verification against pinned roots (ReceiptVerifier, AppReceiptReader) and iOS 6 transaction
// receipts (LegacyTransactionReceipt).
