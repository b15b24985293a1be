import Foundation

/// The gateway's HTTP API (v1) for one app, as an app backend calls it. Every call is bounded by
/// `timeout`; every failure is an `IAPGatewayError` that says whether retrying can help.
///
/// A call that grants or hands out something (`nonce`, `verify`) carries an `Idempotency-Key`, a
/// fresh one per call unless the caller passes its own, and the client retries it, with the same
/// key, while its failure is retryable (no answer, a dropped connection, 503, 429, a key still in
/// flight), honouring `Retry-After`, until `timeout` ends: a retry whose first attempt was granted
/// is answered with that attempt's answer, so `newlyGranted` is never lost. Reads are retried the same way.
public struct IAPGatewayClient: Sendable {
    public let baseURL: URL
    public let bundleId: String
    /// The whole call, its retries included.
    public let timeout: Duration
    /// One attempt of a call (at most what is left of `timeout`).
    public let attemptTimeout: Duration
    private let apiKey: String
    private let transport: any IAPGatewayTransport

    /// `baseURL` is the gateway's root (`https://iapgw.internal:8443`). The API key travels in every
    /// request, so plain `http` is refused unless the gateway is on this machine or
    /// `allowPlainHTTP` says the network between is trusted. `attemptTimeout` (nil: `timeout`) bounds
    /// each attempt: shorter than `timeout`, an attempt that got no answer is retried in time.
    public init(baseURL: URL, bundleId: String, apiKey: String, timeout: Duration = .seconds(30),
                attemptTimeout: Duration? = nil,
                allowPlainHTTP: Bool = false, transport: any IAPGatewayTransport = URLSessionTransport()) throws {
        let scheme = baseURL.scheme?.lowercased()
        let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"].contains(baseURL.host?.lowercased() ?? "")
        guard scheme == "https" || (scheme == "http" && (loopback || allowPlainHTTP)) else {
            throw IAPGatewayError.client(.invalidRequest,
                "the gateway URL must be https (plain http only to this machine, or with allowPlainHTTP)", retryable: false)
        }
        guard timeout > .zero, (attemptTimeout ?? timeout) > .zero, !bundleId.isEmpty, !apiKey.isEmpty else {
            throw IAPGatewayError.client(.invalidRequest, "bundleId, apiKey and positive timeouts are required",
                                         retryable: false)
        }
        self.baseURL = baseURL
        self.bundleId = bundleId
        self.apiKey = apiKey
        self.timeout = timeout
        self.attemptTimeout = min(attemptTimeout ?? timeout, timeout)
        self.transport = transport
    }

    /// A single-use nonce for the next receipt verification of `account`. `idempotencyKey`: see `verify`.
    public func nonce(account: String, idempotencyKey: String? = nil) async throws(IAPGatewayError) -> IAPGatewayNonce {
        try await call("POST", ["nonces"], body: ["account": account], idempotencyKey: idempotencyKey ?? Self.freshKey())
    }

    /// Verifies `evidence` for `account` and, when genuine, binds its purchases to the account and
    /// grants them. `idempotencyKey` (1–255 printable ASCII; nil: a fresh one for this call): a
    /// backend that keeps the key with its own record of the purchase and calls again with it after
    /// a crash of its own gets the first call's answer, `newlyGranted` included.
    public func verify(account: String, evidence: IAPGatewayEvidence, idempotencyKey: String? = nil)
        async throws(IAPGatewayError) -> IAPGatewayVerification {
        try await call("POST", ["verify"], body: evidence.members.merging(["account": account]) { _, account in account },
                       idempotencyKey: idempotencyKey ?? Self.freshKey())
    }

    /// The old-app flow in one call: a fresh nonce, then the receipt with it (each retried with its
    /// own key as `verify` is; the retry of a verification may present its nonce again).
    public func verifyReceipt(_ base64Receipt: String, account: String) async throws(IAPGatewayError) -> IAPGatewayVerification {
        let nonce = try await nonce(account: account)
        return try await verify(account: account, evidence: .receipt(base64Receipt, nonce: nonce.nonce))
    }

    /// A key no other call has: 122 random bits.
    static func freshKey() -> String { UUID().uuidString.lowercased() }

    /// What `account` holds now.
    public func entitlements(account: String) async throws(IAPGatewayError) -> [IAPGatewayEntitlement] {
        let answer: EntitlementsAnswer = try await call("GET", ["accounts", account, "entitlements"], body: nil)
        return answer.entitlements
    }

    /// What support needs about `account`: its verification attempts since `since` (newest first, at
    /// most `limit`, the gateway's default 100 when nil) and the purchase chains it owns.
    public func history(account: String, since: Date? = nil, limit: Int? = nil) async throws(IAPGatewayError) -> IAPGatewayHistory {
        var query: [String: String] = [:]
        if let since { query["since"] = String(Int64((since.timeIntervalSince1970 * 1000).rounded(.down))) }
        if let limit { query["limit"] = String(limit) }
        return try await call("GET", ["accounts", account, "history"], body: nil, query: query)
    }

    /// Apple's transactions of the order a customer quotes from Apple's receipt e-mail, each with
    /// the account here that owns it and that account's history (ORDER_NOT_FOUND: Apple knows no such order).
    public func order(orderId: String) async throws(IAPGatewayError) -> IAPGatewayOrder {
        try await call("GET", ["orders", orderId], body: nil)
    }

    /// The appAccountToken the gateway expects for `account` of this app (see `appAccountToken(bundleId:account:sha256:)`).
    public func appAccountToken(account: String) -> UUID {
        derivedToken(bundleId: bundleId, account: account)
    }

    // MARK: One exchange

    /// One call: its attempts, each with `idempotencyKey` (nil: a read, which changes nothing), until
    /// one is answered, its failure is not retryable, or `timeout` would end before the next.
    private func call<Answer: Decodable>(_ method: String, _ segments: [String], body: [String: String]?,
                                         query: [String: String] = [:], idempotencyKey: String? = nil)
        async throws(IAPGatewayError) -> Answer {
        let deadline = ContinuousClock.now + timeout
        // Each segment percent-encoded whole, so an account holding "/" or "?" stays one segment.
        let path = (["v1", "apps", bundleId] + segments).map(Self.percentEncoded).joined(separator: "/")
        let root = baseURL.absoluteString.hasSuffix("/") ? String(baseURL.absoluteString.dropLast()) : baseURL.absoluteString
        let parameters = query.sorted { $0.key < $1.key }.map { "\(Self.percentEncoded($0.key))=\(Self.percentEncoded($0.value))" }
        guard let url = URL(string: root + "/" + path + (parameters.isEmpty ? "" : "?" + parameters.joined(separator: "&"))) else {
            throw IAPGatewayError.client(.invalidRequest, "the request URL could not be formed", retryable: false)
        }
        var headers = ["Authorization": "Bearer \(apiKey)", "Accept": "application/json"]
        if let idempotencyKey { headers["Idempotency-Key"] = idempotencyKey }
        var data: Data?
        if let body {
            headers["Content-Type"] = "application/json"
            do { data = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys]) } catch {
                throw IAPGatewayError.client(.invalidRequest, "the request could not be encoded", retryable: false)
            }
        }
        var attempt = 0
        while true {
            let left = deadline - ContinuousClock.now
            let request = IAPGatewayHTTPRequest(method: method, url: url, headers: headers, body: data,
                                                timeout: max(.milliseconds(1), min(attemptTimeout, left)))
            do {
                return try Self.decode(try await Self.exchange(request, transport: transport))
            } catch {
                // A write without a key is never sent twice: its first attempt may have been done.
                guard error.retryable, idempotencyKey != nil || method == "GET", !Task.isCancelled else { throw error }
                let wait = error.retryAfter ?? Self.backoff(afterAttempt: attempt)
                guard ContinuousClock.now + wait + .milliseconds(50) < deadline else { throw error }
                do { try await Task.sleep(for: wait) } catch { throw Self.cancelled }
                attempt += 1
            }
        }
    }

    /// A call whose task was cancelled, during an attempt or a wait between two.
    static let cancelled = IAPGatewayError.client(.transportFailed, "the call was cancelled", retryable: true)

    /// The wait before the next attempt when the answer named none: 250 ms doubling to 4 s, each
    /// between half and all of that at random, so retries of many calls do not arrive together.
    static func backoff(afterAttempt attempt: Int) -> Duration {
        let ceiling = 250.0 * Double(1 << min(attempt, 4))
        return .milliseconds(Int64(Double.random(in: ceiling / 2...ceiling)))
    }

    /// The transport's answer or TIMEOUT, whichever comes first: the deadline holds even for a
    /// transport that ignores cancellation (it is cancelled, and its late answer dropped).
    static func exchange(_ request: IAPGatewayHTTPRequest,
                         transport: any IAPGatewayTransport) async throws(IAPGatewayError) -> IAPGatewayHTTPResponse {
        let race = FirstOutcome<IAPGatewayHTTPResponse>()
        let timeout = request.timeout
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    race.start(continuation,
                               work: Task {
                                   do { race.finish(.success(try await transport.send(request))) } catch {
                                       race.finish(.failure(error))
                                   }
                               },
                               timer: Task {
                                   try? await Task.sleep(for: timeout)
                                   race.finish(.failure(IAPGatewayError.client(
                                       .timedOut, "the gateway did not answer within \(timeout)", retryable: true)))
                               })
                }
            } onCancel: {
                race.finish(.failure(CancellationError()))
            }
        } catch let error as IAPGatewayError {
            throw error
        } catch is CancellationError {
            throw cancelled
        } catch {
            // The transport's text (hosts, certificates) goes to `detail`, for the backend's log only.
            throw IAPGatewayError.client(.transportFailed, "the request did not reach the gateway or got no answer",
                                         retryable: true, detail: String(describing: error))
        }
    }

    /// RFC 3986's unreserved characters stay; every other byte of the UTF-8 is %XX.
    static func percentEncoded(_ segment: String) -> String {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return segment.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    static func decode<Answer: Decodable>(_ response: IAPGatewayHTTPResponse) throws(IAPGatewayError) -> Answer {
        let wait = retryAfter(response.headers["retry-after"])
        if (200..<300).contains(response.status) {
            do { return try JSONDecoder().decode(Answer.self, from: response.body) } catch {
                throw IAPGatewayError.client(.unexpectedAnswer, "the gateway's answer could not be read",
                                             status: response.status, retryable: false, detail: String(describing: error))
            }
        }
        guard let envelope = try? JSONDecoder().decode(ErrorEnvelope.self, from: response.body) else {
            // Not the gateway's envelope: a proxy in front of it; 502-504 there mean the gateway is unreachable.
            throw IAPGatewayError.client(.unexpectedAnswer, "HTTP \(response.status) without the gateway's error envelope",
                                         status: response.status, retryAfter: wait,
                                         retryable: [502, 503, 504].contains(response.status))
        }
        let e = envelope.error
        throw IAPGatewayError(kind: .refused, code: e.code, message: e.message, retryable: e.retryable,
                              status: response.status, retryAfter: wait,
                              requestId: e.requestId ?? response.headers["x-request-id"])
    }
}

/// The free function, under a name the method of the same name does not shadow.
private func derivedToken(bundleId: String, account: String) -> UUID {
    appAccountToken(bundleId: bundleId, account: account, sha256: IAPGatewaySHA256.hash)
}

/// Hands the first outcome to the continuation and cancels the other task.
private final class FirstOutcome<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Value, any Error>?
    private var early: Result<Value, any Error>?
    private var tasks: [Task<Void, Never>] = []
    private var done = false

    func start(_ continuation: CheckedContinuation<Value, any Error>, work: Task<Void, Never>, timer: Task<Void, Never>) {
        lock.lock()
        tasks = [work, timer]
        if let early {
            lock.unlock()
            work.cancel()
            timer.cancel()
            continuation.resume(with: early)
            return
        }
        self.continuation = continuation
        lock.unlock()
    }

    func finish(_ outcome: Result<Value, any Error>) {
        lock.lock()
        guard !done else { lock.unlock(); return }
        done = true
        let continuation = self.continuation
        self.continuation = nil
        let tasks = self.tasks
        if continuation == nil { early = outcome }
        lock.unlock()
        for task in tasks { task.cancel() }
        continuation?.resume(with: outcome)
    }
}
