import Foundation
import IAPCore

/// One `processPending` call, shared by the threads draining batches of it: what is claimed (one
/// claim at a time), the chains in flight, the calls to `apply` (one at a time), the report.
///
/// Order within a chain: a batch applies an entry only if no other batch of this drain holds an
/// entry of its chain, it holds the chain's lock (`trySerializeTransaction`, which keeps other
/// instances out), and no older due entry of the chain is outside the batch (`readChains`: one that
/// another instance's batch holds, claimed without the chain's lock). Claims take the oldest due
/// rows that no open transaction holds, so a chain's due entries are applied in order, by one batch
/// at a time, across instances too (an entry waiting for its retry does not hold back later ones).
final class InboxDrain: @unchecked Sendable {
    /// A batch's entries and the chains among them it may apply.
    struct Claim {
        let entries: [(seq: Int64, entry: InboxEntry)]
        let chains: Set<SQLLedger.ChainKey>
        let held: Set<SQLLedger.ChainKey>

        func mayApply(_ entry: InboxEntry) -> Bool { SQLLedger.ChainKey(of: entry).map(held.contains) ?? true }
    }

    private let limit: Int
    /// The apps whose webhook events the batches store (`SQLLedger.webhookAudience`).
    let webhookAudience: WebhookAudience
    /// Held across a claim's statements: `claimed` and `chainsInFlight` change only under it.
    private let claiming = NSLock()
    private var claimed = 0
    /// Per chain, the batches in flight that claimed an entry of it.
    private var chainsInFlight: [SQLLedger.ChainKey: Int] = [:]
    /// Held while `apply` runs: the caller's closure is not required to be thread-safe.
    private let applying = NSLock()
    private var applyBody: ((InboxEntry, SubscriptionState?) throws(VerificationError) -> LifecycleOutcome)?
    /// Guards `over`, `failure` and `total`.
    private let state = NSLock()
    private var over = false
    private var failure: VerificationError?
    private var total = ProcessReport()

    init(limit: Int, webhookAudience: WebhookAudience,
         apply: @escaping (InboxEntry, SubscriptionState?) throws(VerificationError) -> LifecycleOutcome) {
        self.limit = limit
        self.webhookAudience = webhookAudience
        applyBody = apply
    }

    /// True once every entry was claimed (or none is due), or a batch failed: no batch is to start.
    var isOver: Bool { state.withLock { over } }

    private func stop(_ error: VerificationError? = nil) {
        state.withLock {
            over = true
            if failure == nil { failure = error }
        }
    }

    /// Runs one batch; a failure ends the drain (the other batches finish theirs).
    func runBatch(_ batch: () throws(VerificationError) -> Void) {
        do throws(VerificationError) {
            try batch()
        } catch {
            stop(error)
        }
    }

    func runBatches(_ batch: () throws(VerificationError) -> Void) {
        while !isOver { runBatch(batch) }
    }

    /// Claims the next batch's entries in the caller's transaction, and the locks of their chains
    /// that no other batch of this drain holds; nil once the drain is over.
    func claim(now: Int64, _ connection: any SQLConnection) throws(VerificationError) -> Claim? {
        claiming.lock()
        defer { claiming.unlock() }
        guard !isOver, claimed < limit else {
            stop()
            return nil
        }
        let size = min(SQLLedger.entriesPerCommit, limit - claimed)
        let entries = try SQLLedger.claimDue(size, now: now, connection)
        claimed += entries.count
        if entries.count < size || claimed >= limit { stop() }
        var chains: [SQLLedger.ChainKey] = []
        for case let chain? in entries.map({ SQLLedger.ChainKey(of: $0.entry) }) where !chains.contains(chain) { chains.append(chain) }
        let free = chains.filter { chainsInFlight[$0] == nil }
        let locked = try connection.trySerializeTransaction(on: free.map(\.lock))
        for chain in chains { chainsInFlight[chain, default: 0] += 1 }
        return Claim(entries: entries, chains: Set(chains), held: Set(free.filter { locked.contains($0.lock) }))
    }

    /// The batch of `claim` ended (committed or rolled back): its chains are free for the others.
    func finish(_ claim: Claim) {
        claiming.withLock {
            for chain in claim.chains {
                let batches = (chainsInFlight[chain] ?? 1) - 1
                chainsInFlight[chain] = batches > 0 ? batches : nil
            }
        }
    }

    func apply(_ entry: InboxEntry, _ stored: SubscriptionState?) throws(VerificationError) -> LifecycleOutcome {
        applying.lock()
        defer { applying.unlock() }
        guard let applyBody else { throw VerificationError(.internalError, "storage: an inbox entry applied after its drain") }
        return try applyBody(entry, stored)
    }

    func add(_ report: ProcessReport) {
        state.withLock { total.add(report) }
    }

    /// Drops the caller's closure: every thread is done with it.
    func end() { applying.withLock { applyBody = nil } }

    /// What the batches applied, or the first failure.
    func report() throws(VerificationError) -> ProcessReport {
        state.lock()
        defer { state.unlock() }
        if let failure { throw failure }
        return total
    }
}
