import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPCore

/// The HTTP leg of an OCSP check, injectable so tests never touch the network.
/// Any failure must be thrown as `REVOCATION_CHECK_UNAVAILABLE` (retryable).
public protocol OCSPTransport: Sendable {
    func post(_ body: Data, to url: URL, timeout: TimeInterval) throws(VerificationError) -> Data
}

/// Default transport: URLSession (libcurl on Linux), bridged to the synchronous verifier.
///
/// Plain http is allowed because OCSP is http by design (RFC 6960 responders, Apple's included):
/// the transport is not trusted, the answer is — `OCSPRevocationCheck` verifies its signature
/// against the pinned roots, its freshness and that it names the certificate asked about. What
/// the transport does refuse is what an on-path attacker could abuse: redirects (to another
/// host, or to a slow one), bodies over `maxResponseBytes`, and a task outliving its timeout.
///
/// The calling thread blocks until the answer or the timeout (the verifier is synchronous; the
/// revocation result is cached per chain, so this happens once per `revocationRecheckSeconds`).
/// Async callers verify through `SignedDataVerifier.verifying`, which runs verifications with online
/// checks on threads of their own: this wait never holds a thread of the cooperative pool.
public struct URLSessionOCSPTransport: OCSPTransport {
    public static let maxResponseBytes = 64 * 1024

    public init() {}

    public func post(_ body: Data, to url: URL, timeout: TimeInterval) throws(VerificationError) -> Data {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/ocsp-request", forHTTPHeaderField: "Content-Type")
        let exchange = OCSPExchange(limit: Self.maxResponseBytes)
        let delegate = OCSPSession.shared.delegate
        let task = OCSPSession.shared.session.dataTask(with: request)
        delegate.register(task.taskIdentifier, exchange)
        defer { delegate.unregister(task.taskIdentifier) }
        task.resume()
        guard exchange.done.wait(timeout: .now() + timeout + 1) == .success else {
            task.cancel()  // no request may outlive the verification that wanted it
            throw VerificationError(.revocationCheckUnavailable, "OCSP responder \(url.host ?? "?") timed out")
        }
        guard let data = exchange.body else {
            throw VerificationError(.revocationCheckUnavailable, "OCSP responder \(url.host ?? "?") unreachable or refused: \(exchange.failure)")
        }
        return data
    }
}

/// One response being received: the body so far, capped, and whether it completed as a 200.
final class OCSPExchange: @unchecked Sendable {
    let limit: Int
    let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var received = Data()
    private var ok = false
    private var reason = "no answer"

    init(limit: Int) { self.limit = limit }

    var body: Data? { lock.withLock { ok ? received : nil } }
    var failure: String { lock.withLock { reason } }

    /// Returns false once the body exceeds the cap (the caller cancels the task).
    func append(_ data: Data) -> Bool {
        lock.withLock {
            guard received.count + data.count <= limit else { reason = "answer over \(limit) bytes"; return false }
            received.append(data)
            return true
        }
    }

    func reject(_ why: String) { lock.withLock { reason = why } }

    func finish(status: Int?, error: Error?) {
        lock.withLock {
            if error == nil, status == 200, reason == "no answer" { ok = true } else if reason == "no answer" {
                reason = error != nil ? "transfer failed" : "HTTP status \(status.map(String.init) ?? "?")"
            }
        }
        done.signal()
    }
}

/// One session for all OCSP requests (a session per request would leak its delegate until
/// invalidated); the delegate routes callbacks to each request's exchange by task id.
final class OCSPSession: @unchecked Sendable {
    static let shared = OCSPSession()
    let delegate = OCSPSessionDelegate()
    let session: URLSession

    private init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpShouldSetCookies = false
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }
}

final class OCSPSessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var exchanges: [Int: OCSPExchange] = [:]

    func register(_ id: Int, _ exchange: OCSPExchange) { lock.withLock { exchanges[id] = exchange } }
    func unregister(_ id: Int) { _ = lock.withLock { exchanges.removeValue(forKey: id) } }
    private func exchange(_ task: URLSessionTask) -> OCSPExchange? { lock.withLock { exchanges[task.taskIdentifier] } }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        // A responder that redirects is not answering; following would let anyone on path send
        // the verifier elsewhere.
        exchange(task)?.reject("redirect refused (HTTP \(response.statusCode))")
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let exchange = exchange(dataTask) else { return }
        if !exchange.append(data) { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        exchange(task)?.finish(status: (task.response as? HTTPURLResponse)?.statusCode, error: error)
    }
}
