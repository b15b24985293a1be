import Foundation
import IAPCore
import UpstreamHTTP

/// The HTTP leg of an OCSP check, injectable so tests never touch the network.
/// Any failure must be thrown as `REVOCATION_CHECK_UNAVAILABLE` (retryable).
public protocol OCSPTransport: Sendable {
    func post(_ body: Data, to url: URL, timeout: Duration) async throws(VerificationError) -> Data
}

/// Default transport: the gateway's one outgoing HTTP stack, `UpstreamHTTPClient` (libcurl on a
/// thread of its own), so a request waiting on a responder holds no thread of the cooperative pool.
///
/// Plain http is allowed to any host because OCSP is http by design (RFC 6960 responders, Apple's
/// included): the transport is not trusted, the answer is — `OCSPRevocationCheck` verifies its
/// signature against the pinned roots, its freshness and that it names the certificate asked about.
/// What the transport does refuse is what an on-path attacker could abuse: redirects (to another
/// host, or to a slow one), bodies over `maxResponseBytes`, and a request outliving its timeout or
/// the caller's `UpstreamDeadline`, whichever ends first.
public struct UpstreamOCSPTransport: OCSPTransport {
    public static let maxResponseBytes = 64 * 1024

    /// One client for every OCSP request of the process, built at first use: it keeps connections
    /// to the responders alive, and verifiers that never check online start no thread for it. Its
    /// timeouts are only a ceiling: each call's own `timeout` (an `UpstreamDeadline`) bounds it.
    static let client = Result { () throws(UpstreamError) -> UpstreamHTTPClient in
        try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(60), requestTimeout: .seconds(60), maxResponseBytes: maxResponseBytes,
            allowsPlainHTTPToAnyHost: true))
    }

    public init() {}

    public func post(_ body: Data, to url: URL, timeout: Duration) async throws(VerificationError) -> Data {
        guard case .success(let client) = Self.client else { throw Self.unavailable("the OCSP client could not start") }
        let request = UpstreamRequest(method: "POST", url: url.absoluteString,
                                      headers: [("Content-Type", "application/ocsp-request")], body: Array(body))
        let outcome = await UpstreamDeadline.within(timeout) { () async -> Result<UpstreamResponse, UpstreamError> in
            do throws(UpstreamError) { return .success(try await client.send(request)) } catch { return .failure(error) }
        }
        switch outcome {
        // Redirects are never followed (the client does not): a responder that redirects is not answering.
        case .success(let response) where response.status == 200: return Data(response.body)
        case .success(let response): throw Self.unavailable("the OCSP responder answered HTTP \(response.status)")
        case .failure(.timedOut): throw Self.unavailable("the OCSP responder did not answer in time")
        case .failure(.responseTooLarge): throw Self.unavailable("the OCSP answer is over \(Self.maxResponseBytes) bytes")
        case .failure(.cancelled): throw Self.unavailable("the OCSP request was cancelled")
        case .failure: throw Self.unavailable("the OCSP responder is unreachable")
        }
    }

    private static func unavailable(_ why: String) -> VerificationError { VerificationError(.revocationCheckUnavailable, why) }
}
