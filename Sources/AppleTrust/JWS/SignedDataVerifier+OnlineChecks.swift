import IAPCore
import Synchronization

extension SignedDataVerifier {
    /// Runs `body`, verifications with this verifier, from async code. With online checks on, the
    /// OCSP answers the verifications need are awaited here (`OnlineChecks`), not inside `body`:
    /// the verifier stays synchronous and pure CPU, and a silent responder holds no thread.
    public func verifying<T>(_ body: (SignedDataVerifier) throws(VerificationError) -> T) async throws(VerificationError) -> T {
        try await Self.withOnlineChecks(when: enableOnlineChecks) { () throws(VerificationError) -> T in try body(self) }
    }

    /// The same for callers that verify through something holding verifiers of its own (the
    /// notification decoder): `online` is whether any verifier `body` uses checks online.
    public static func withOnlineChecks<T>(when online: Bool, _ body: () throws(VerificationError) -> T)
        async throws(VerificationError) -> T {
        guard online else { return try body() }
        return try await OnlineChecks().run(body)
    }
}

/// The OCSP answers of one async verification. A verification that reaches its online check for a
/// chain with no recent answer (`SignedDataVerifier.revocationVerdict`) records the chain here and
/// refuses; once `body` has run, the recorded chains are asked about (awaited, on `OCSPTransport`)
/// and `body` runs again, now finding each answer: as if the check had waited inline, refusal for
/// refusal, including in a body that catches its refusals. `body` must be pure verification, as
/// it may run once more per chain asked about.
final class OnlineChecks: Sendable {
    @TaskLocal static var current: OnlineChecks?

    /// A body verifies a handful of chains at most (a notification: outer and inner JWS).
    static let maxRounds = 8

    /// One chain of one verifier's pinned roots (answers must chain to them), by its JWS header.
    struct Key: Hashable {
        let policy: ObjectIdentifier
        let header: [UInt8]
    }

    private struct Question {
        let check: OCSPRevocationCheck
        let chain: [X509Certificate]
    }

    private struct State {
        var questions: [Key: Question] = [:]
        /// The check is kept with its answer so its pinned policy outlives the key naming it.
        var answers: [Key: (OCSPRevocationCheck, Result<Void, VerificationError>)] = [:]
    }

    private let state = Mutex(State())

    func run<T>(_ body: () throws(VerificationError) -> T) async throws(VerificationError) -> T {
        for _ in 0..<Self.maxRounds {
            let outcome = Self.$current.withValue(self) { Result { () throws(VerificationError) -> T in try body() } }
            let questions = state.withLock { state in
                defer { state.questions = [:] }
                return state.questions
            }
            guard !questions.isEmpty else { return try outcome.get() }
            for (key, question) in questions {
                let answer: Result<Void, VerificationError>
                do throws(VerificationError) {
                    try await question.check.check(question.chain)
                    answer = .success(())
                } catch {
                    answer = .failure(error)
                }
                state.withLock { $0.answers[key] = (question.check, answer) }
            }
        }
        throw VerificationError(.revocationCheckUnavailable, "one verification asked about too many certificate chains")
    }

    /// This verification's answer for the chain: nothing when good, its refusal otherwise; a
    /// chain not asked about yet is recorded and refused (the round then asks and runs again).
    func answer(_ key: Key, check: OCSPRevocationCheck, chain: [X509Certificate]) throws(VerificationError) {
        let found = state.withLock { state -> Result<Void, VerificationError>? in
            if let (_, answer) = state.answers[key] { return answer }
            state.questions[key] = Question(check: check, chain: chain)
            return nil
        }
        guard let found else { throw VerificationError(.revocationCheckUnavailable, "the OCSP answer is awaited") }
        try found.get()
    }
}

extension SignedDataVerifier {
    /// The online check of a chain due for one: the answer of the enclosing async verification
    /// (`verifying`, `withOnlineChecks`). A synchronous caller has nothing to await it with, so it
    /// is refused, as an unreachable responder would be.
    func revocationVerdict(header: UnsafeBufferPointer<UInt8>, chain: [X509Certificate]) throws(VerificationError) {
        guard let checks = OnlineChecks.current else {
            throw VerificationError(.revocationCheckUnavailable, "online checks are answered only to async callers (verifying)")
        }
        try checks.answer(OnlineChecks.Key(policy: ObjectIdentifier(policy), header: Array(header)), check: revocation, chain: chain)
    }
}
