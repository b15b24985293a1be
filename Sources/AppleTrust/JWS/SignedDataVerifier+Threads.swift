import IAPCore

extension SignedDataVerifier {
    /// Where verifications with online checks run: an OCSP request blocks its thread until the
    /// responder answers or times out (5 s per certificate), so it must never hold a thread of
    /// Swift's cooperative pool. Two requests of 5 s each fit the deadline.
    static let onlineCheckThreads = BlockingExecutor(purpose: "ocsp", unavailable: .revocationCheckUnavailable,
                                                     limits: .init(threads: 4, queueCapacity: 256, deadline: .seconds(15)))

    /// Runs `body`, a verification with this verifier, from async code: on threads of their own
    /// when online checks are on (it may wait on an OCSP responder), inline otherwise (no I/O then).
    public func verifying<T: Sendable>(_ body: @escaping @Sendable (SignedDataVerifier) throws(VerificationError) -> T)
        async throws(VerificationError) -> T {
        try await Self.offPool(when: enableOnlineChecks) { () throws(VerificationError) -> T in try body(self) }
    }

    /// Runs `body` on the online-check threads when `online`, inline otherwise: for callers that
    /// verify through something holding verifiers of its own (the notification decoder).
    public static func offPool<T: Sendable>(when online: Bool, _ body: @escaping @Sendable () throws(VerificationError) -> T)
        async throws(VerificationError) -> T {
        guard online else { return try body() }
        return try await onlineCheckThreads.run(body)
    }
}
