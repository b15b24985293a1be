import AppleTrust
import Foundation
import IAPConfig
import IAPCore
import Synchronization

/// The one factory of JWS verifiers, and the one verifier (with its verified-chain cache) per app,
/// for everything Apple signs about that app: the Server API adapter's transactions and renewal
/// info, and notifications. Built at load time (`prepare`), or at first use for a policy not
/// prepared, and kept with the policy it was built from, so another policy under the same bundle id
/// never gets a verifier of other roots or environments.
///
/// Each verifier holds payloads to the app's identity for Apple's own messages (`AppPolicy.identity(for: .apple)`:
/// Sandbox wherever the app takes Sandbox evidence at all, plus the local test environments where
/// the policy enables them); a claim's own identity (Sandbox only for App Review accounts) is
/// applied after it, by the claim policy, which knows the account.
public final class AppVerifiers: Sendable {
    let now: @Sendable () -> Date
    let ocspTransport: any OCSPTransport
    /// `limits.maxJWSBytes`: every JWS, outer or inner, verified for any app.
    let maxJWSBytes: Int
    /// Each app's verifier, or why its policy makes none, with the policy it was built from.
    private let verifiers = Mutex<[String: (AppPolicy, Result<SignedDataVerifier, VerificationError>)]>([:])

    public init(now: @escaping @Sendable () -> Date = { Date() },
                ocspTransport: any OCSPTransport = UpstreamOCSPTransport(),
                maxJWSBytes: Int = SignedDataVerifier.defaultMaxInputBytes) {
        self.now = now
        self.ocspTransport = ocspTransport
        self.maxJWSBytes = maxJWSBytes
    }

    public func verifier(for app: AppPolicy) throws(VerificationError) -> SignedDataVerifier {
        if let (policy, made) = verifiers.withLock({ $0[app.bundleId] }), policy == app { return try made.get() }
        let made = Result { () throws(VerificationError) -> SignedDataVerifier in
            try SignedDataVerifier(policy: app, ocspTransport: ocspTransport, maxInputBytes: maxJWSBytes, now: now)
        }
        verifiers.withLock { $0[app.bundleId] = (app, made) }
        return try made.get()
    }

    /// Builds the verifiers of `apps` now, reading their trust-root files: at load time (the
    /// gateway's start, off the pool), so no request waits for a file. A policy that makes no
    /// verifier keeps its refusal, answered to its requests without reading the files again.
    public func prepare(_ apps: some Sequence<AppPolicy>) {
        for app in apps { _ = try? verifier(for: app) }
    }

    /// Chain-cache hits and misses summed over the per-app verifiers (for `/metrics`).
    public var chainCacheCounts: (hits: Int, misses: Int) {
        verifiers.withLock { verifiers in
            verifiers.values.compactMap { try? $0.1.get() }.reduce((0, 0)) { ($0.0 + $1.chainCacheHits, $0.1 + $1.chainCacheMisses) }
        }
    }

    /// The one reader of an app's trust-root files (`trustRoots.jws`, `trustRoots.receipts`): each
    /// must be readable and non-empty, and the list may not be empty (nothing pinned verifies nothing).
    public static func loadRoots(_ urls: [URL], app: AppPolicy, what: String) throws(VerificationError) -> [Data] {
        guard !urls.isEmpty else { throw VerificationError(.invalidConfiguration, "\(app.bundleId): \(what) is empty") }
        var roots: [Data] = []
        for url in urls {
            guard let data = try? Data(contentsOf: url), !data.isEmpty else {
                throw VerificationError(.invalidConfiguration, "\(app.bundleId): \(what): cannot read \(url.path)")
            }
            roots.append(data)
        }
        return roots
    }
}
