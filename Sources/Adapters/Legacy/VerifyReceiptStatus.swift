import IAPCore

/// What one `verifyReceipt` status means for the gateway. Apple's codes (0, 21000–21010,
/// 21100–21199) are the contract; every one of them lands on a stable `VerificationError` code.
enum VerifyReceiptStatus: Equatable {
    /// 0, and 21006 (an expired subscription receipt: the body is still a valid answer).
    case valid
    /// 21007: a sandbox receipt sent to production.
    case sandboxReceipt
    /// 21008: a production receipt sent to the sandbox.
    case productionReceipt
    /// 21004: the shared secret was refused.
    case secretRejected
    /// 21005, 21009, 21100–21199: Apple's side failed; the same request may succeed later.
    case temporary
    /// A final refusal with its code.
    case refused(VerificationError.Code, String)

    init(_ status: Int64) {
        switch status {
        case 0, 21006: self = .valid
        case 21007: self = .sandboxReceipt
        case 21008: self = .productionReceipt
        case 21004: self = .secretRejected
        case 21005, 21009, 21100...21199: self = .temporary
        // Our request's shape was refused (not POST, unreadable JSON): a wrong upstream URL or a gateway
        // bug, which an operator must look at; the evidence is not to blame.
        case 21000: self = .refused(.invalidConfiguration, "verifyReceipt could not read the request (21000)")
        // Malformed receipt-data: the same fault local PKCS#7 parsing reports as MALFORMED_RECEIPT, so both
        // paths give one code (a 21002 with is-retryable true is retried before it gets here).
        case 21002: self = .refused(.malformedReceipt, "verifyReceipt says the receipt data is malformed (21002)")
        case 21003: self = .refused(.receiptNotAuthentic, "verifyReceipt could not authenticate the receipt (21003)")
        case 21010: self = .refused(.transactionNotFound,
                                    "verifyReceipt cannot find the user account, or it was deleted (21010)")
        // 21001 is retired by Apple; anything else is unknown. Fail closed, without blaming the evidence.
        default: self = .refused(.upstreamUnavailable, "verifyReceipt answered unknown status \(status)")
        }
    }
}
