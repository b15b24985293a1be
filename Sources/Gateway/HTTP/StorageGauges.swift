import IAPCore
import Ledger
import Synchronization

/// The `/metrics` gauges read from storage (inbox, outbox, comparisons), kept from the last read.
/// A scrape starts a read when none is running (so at most one is ever in flight), waits for it
/// at most `scrapeWait`, and answers with the last gauges read and how old they are: a scrape
/// never waits on storage that stopped answering.
final class StorageGauges: Sendable {
    static let scrapeWait: Duration = .milliseconds(200)

    private struct State {
        var text: String?
        var readAt: ContinuousClock.Instant?
        var reading: Task<Void, Never>?
    }

    private let state = Mutex(State())
    private let read: @Sendable () async throws(VerificationError) -> String

    init(read: @escaping @Sendable () async throws(VerificationError) -> String) {
        self.read = read
    }

    /// The last gauges read (none before the first read succeeds) and their age.
    func text() async -> String {
        let reading = state.withLock { current -> Task<Void, Never> in
            if let reading = current.reading { return reading }
            let reading = Task { [self] in
                let text = try? await read()
                state.withLock { done in
                    if let text {
                        done.text = text
                        done.readAt = ContinuousClock.now
                    }
                    done.reading = nil
                }
            }
            current.reading = reading
            return reading
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let answer = FirstAnswer(continuation)
            Task { await reading.value; answer.give(()) }
            Task { try? await Task.sleep(for: Self.scrapeWait); answer.give(()) }
        }
        let (text, readAt) = state.withLock { ($0.text, $0.readAt) }
        guard let text, let readAt else { return "" }
        let age = ContinuousClock.now - readAt
        return text + "# HELP iapgw_storage_gauges_age_seconds How long ago the storage gauges above were read.\n"
            + "# TYPE iapgw_storage_gauges_age_seconds gauge\n"
            + "iapgw_storage_gauges_age_seconds \(Double(age / .milliseconds(1)) / 1000)\n"
    }
}
