#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Outgoing HTTP(S) for the gateway: Apple's verifyReceipt and App Store Server API, or a loopback
/// simulator; OCSP responders. Requests are refused before any network activity when the URL is not
/// https (plain http is allowed to loopback only, unless the configuration allows it anywhere).
/// Certificate and host-name verification are always on.
public final class UpstreamHTTPClient: Sendable {
    public let configuration: UpstreamHTTPConfiguration
    private let engine: CurlEngine
    private let observer: (any UpstreamCallObserver)?

    public init(configuration: UpstreamHTTPConfiguration,
                observer: (any UpstreamCallObserver)? = nil) throws(UpstreamError) {
        guard configuration.connectTimeout > .zero, configuration.requestTimeout > .zero else {
            throw .invalidConfiguration("timeouts must be positive")
        }
        guard configuration.maxResponseBytes > 0 else { throw .invalidConfiguration("maxResponseBytes must be positive") }
        guard configuration.maxConnectionsPerHost > 0 else {
            throw .invalidConfiguration("maxConnectionsPerHost must be positive")
        }
        guard !configuration.userAgent.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
            throw .invalidConfiguration("userAgent contains a line break")
        }
        if let bundle = configuration.caBundlePath {
            // Checked here so a typo fails at start rather than as a TLS error on the first request.
            guard let file = fopen(bundle, "r") else { throw .invalidConfiguration("CA bundle not readable: \(bundle)") }
            fclose(file)
        }
        self.configuration = configuration
        self.observer = observer
        engine = try CurlEngine(maxConnectionsPerHost: configuration.maxConnectionsPerHost)
    }

    deinit { engine.shutdown() }

    var transfersStarted: Int { engine.transfersStarted.load(ordering: .relaxed) }

    public func send(_ request: UpstreamRequest) async throws(UpstreamError) -> UpstreamResponse {
        guard let observer, let label = request.label else { return try await exchange(request) }
        let started = ContinuousClock.now
        let outcome: UpstreamCallOutcome
        defer { observer.upstreamCallFinished(label, outcome: outcome, duration: started.duration(to: .now)) }
        do {
            let response = try await exchange(request)
            outcome = .answered(status: response.status)
            return response
        } catch {
            outcome = UpstreamCallOutcome(error)
            throw error
        }
    }

    private func exchange(_ request: UpstreamRequest) async throws(UpstreamError) -> UpstreamResponse {
        let method = request.method.uppercased()
        try HeaderPolicy.checkMethod(method)
        let target = try URLPolicy.check(request.url, plainHTTPToAnyHost: configuration.allowsPlainHTTPToAnyHost)
        try HeaderPolicy.check(request.headers)
        if Task.isCancelled { throw .cancelled }
        // Within a deadline (a request's budget, a retry policy's), no transfer outlasts it.
        var limits = configuration
        if let left = UpstreamDeadline.remaining {
            guard left > .zero else { throw .timedOut }
            limits.connectTimeout = min(limits.connectTimeout, left)
            limits.requestTimeout = min(limits.requestTimeout, left)
        }

        let transfer = CurlTransfer(method: method, url: target.normalizedURL, headers: request.headers,
                                    body: request.body, configuration: limits)
        let engine = self.engine
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                transfer.continuation = continuation
                engine.submit(transfer)
            }
        } onCancel: {
            transfer.cancelRequested.store(true, ordering: .relaxed)
            engine.wake()
        }
        return try result.get()
    }
}
