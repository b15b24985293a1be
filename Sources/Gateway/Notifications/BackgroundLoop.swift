import IAPCore

/// The loop every background worker runs (inbox, webhooks, finish outbox, entitlement sweep): a
/// pass, then a pause of `interval`, until cancelled. A failed pass is logged as `failure` with its
/// code only and tried again after the pause, so a storage outage slows the worker but never ends it.
func repeatUntilCancelled(every interval: Duration, logger: Logger, failure: String,
                          _ pass: () async throws(VerificationError) -> Void) async {
    while !Task.isCancelled {
        do {
            try await pass()
        } catch {
            logger.error(failure, ["code": error.code.rawValue])
        }
        try? await Task.sleep(for: interval)
    }
}
