import Foundation
import IAPConfig
import IAPCore
import UpstreamHTTP

/// Calls Apple's App Store Server API for one app (one key, one bundle id): routes, bearer token,
/// bounded retries honouring Retry-After, production-then-sandbox fallback, and Apple's error codes
/// turned into `VerificationError`. It returns signed data unverified; the adapter verifies it.
public struct AppStoreServerAPIClient: Sendable {
    /// Apple's `errorCode`s this client acts on (the rest are reported by number).
    public enum AppleErrorCode {
        public static let accountNotFound: Int64 = 4040001
        public static let accountNotFoundRetryable: Int64 = 4040002
        public static let appNotFound: Int64 = 4040003
        public static let appNotFoundRetryable: Int64 = 4040004
        public static let originalTransactionIdNotFound: Int64 = 4040005
        public static let originalTransactionIdNotFoundRetryable: Int64 = 4040006
        public static let transactionIdNotFound: Int64 = 4040010
        /// Get App Transaction Info: the customer has no app transaction for this app.
        public static let appTransactionDoesNotExist: Int64 = 4040019
        public static let invalidTransactionId: Int64 = 4000006
        public static let invalidOriginalTransactionId: Int64 = 4000008
        public static let rateLimitExceeded: Int64 = 4290000
        public static let generalInternalRetryable: Int64 = 5000001

        static let retryable: Set<Int64> = [accountNotFoundRetryable, appNotFoundRetryable,
                                            originalTransactionIdNotFoundRetryable, generalInternalRetryable]
        /// Answers that mean "not in this environment": the only ones that justify asking sandbox.
        static let notFound: Set<Int64> = [transactionIdNotFound, originalTransactionIdNotFound, accountNotFound, appNotFound,
                                           appTransactionDoesNotExist]
    }

    public let baseURLs: EnvironmentURLs
    public let tokenProvider: any ServerAPITokenProviding
    public let upstream: UpstreamHTTPClient
    public let retryPolicy: RetryPolicy
    /// What `retryAfterSeconds` says when Apple gave up without sending Retry-After.
    public let defaultRetryAfterSeconds: Int
    /// Paged routes stop after this many pages (a runaway `hasMore` must not loop forever).
    public let maxPages: Int
    let logger: Logger
    let sleep: RetryPolicy.Sleep

    public init(baseURLs: EnvironmentURLs, tokenProvider: any ServerAPITokenProviding, upstream: UpstreamHTTPClient,
                retryPolicy: RetryPolicy = RetryPolicy(), logger: Logger = .disabled, maxPages: Int = 50,
                defaultRetryAfterSeconds: Int = 5, sleep: @escaping RetryPolicy.Sleep = RetryPolicy.taskSleep) {
        self.baseURLs = baseURLs
        self.tokenProvider = tokenProvider
        self.upstream = upstream
        self.retryPolicy = retryPolicy
        self.logger = logger
        self.maxPages = max(1, maxPages)
        self.defaultRetryAfterSeconds = max(1, defaultRetryAfterSeconds)
        self.sleep = sleep
    }

    // MARK: Request machinery

    struct Call {
        var method: String
        /// Route name for logs, errors and the upstream metrics label ("getTransactionInfo"): a constant, never an id.
        var name: String
        var path: String
        var query: [(String, String)] = []
        var body: JSONValue? = nil
    }

    /// Why one attempt did not succeed.
    enum AttemptFailure: Error {
        case transport(UpstreamError)
        case apple(status: Int, errorCode: Int64?, errorMessage: String?, retryAfterSeconds: Int?)
        case local(VerificationError)
    }

    /// Sends the call to each environment of `order` in turn, moving on only when Apple says the
    /// transaction, account or app is unknown there. Returns the answering environment and body.
    func perform(_ call: Call, order: ServerAPIEnvironmentOrder) async throws(VerificationError)
        -> (ServerAPIEnvironment, UpstreamResponse) {
        let environments = order.environments
        for (index, environment) in environments.enumerated() {
            do {
                return (environment, try await attemptWithRetries(call, environment: environment))
            } catch {
                let isLast = index == environments.count - 1
                if !isLast, case .apple(_, let code?, _, _) = error.lastError, AppleErrorCode.notFound.contains(code) {
                    logger.info("serverapi.fallback", ["route": call.name, "from": environment.rawValue,
                                                       "errorCode": String(code)])
                    continue
                }
                throw map(error, call: call, environment: environment)
            }
        }
        throw VerificationError(.invalidConfiguration, "no App Store Server API environment to ask")
    }

    private func attemptWithRetries(_ call: Call, environment: ServerAPIEnvironment) async
        throws(RetryGaveUp<AttemptFailure>) -> UpstreamResponse {
        try await retryPolicy.run(sleep: sleep) { attempt async -> RetryDecision<UpstreamResponse, AttemptFailure> in
            await self.attempt(call, environment: environment, number: attempt)
        }
    }

    private func attempt(_ call: Call, environment: ServerAPIEnvironment, number: Int) async
        -> RetryDecision<UpstreamResponse, AttemptFailure> {
        let token: String
        do {
            token = try tokenProvider.bearerToken()
        } catch {
            return .fail(.local(error))
        }
        var headers = [("Authorization", "Bearer " + token), ("Accept", "application/json")]
        var body: [UInt8]?
        if let json = call.body {
            headers.append(("Content-Type", "application/json"))
            body = Array(json.jsonText.utf8)
        }
        let request = UpstreamRequest(method: call.method, url: url(call, environment), headers: headers, body: body,
                                      label: UpstreamCallLabel(endpoint: call.name,
                                                               environment: environment == .production ? "production" : "sandbox"))
        let response: UpstreamResponse
        do {
            response = try await upstream.send(request)
        } catch {
            logger.warning("serverapi.transport", ["route": call.name, "environment": environment.rawValue,
                                                   "attempt": String(number), "error": String(describing: error)])
            return error.isRetryable ? .retry(.transport(error)) : .fail(.transport(error))
        }
        logger.debug("serverapi.response", ["route": call.name, "environment": environment.rawValue,
                                            "attempt": String(number), "status": String(response.status)])
        if (200..<300).contains(response.status) { return .success(response) }

        let apple = Self.appleError(response.body)
        AppleAnswerNote.note("HTTP \(response.status)" + (apple.map { " errorCode \($0.code)" } ?? ""))
        let failure = AttemptFailure.apple(status: response.status, errorCode: apple?.code, errorMessage: apple?.message,
                                           retryAfterSeconds: response.retryAfterSeconds)
        let code = apple?.code
        if response.status == 429 || code == AppleErrorCode.rateLimitExceeded {
            return .retry(failure, retryAfter: response.retryAfter)
        }
        if let code, AppleErrorCode.retryable.contains(code) { return .retry(failure, retryAfter: response.retryAfter) }
        if [500, 502, 503, 504].contains(response.status) { return .retry(failure, retryAfter: response.retryAfter) }
        return .fail(failure)
    }

    private func url(_ call: Call, _ environment: ServerAPIEnvironment) -> String {
        var url = baseURLs.base(environment) + call.path
        if !call.query.isEmpty {
            url += "?" + call.query.map { Self.percentEncode($0.0) + "=" + Self.percentEncode($0.1) }.joined(separator: "&")
        }
        return url
    }

    /// RFC 3986 unreserved characters stay; everything else is escaped (path segments and query values).
    static func percentEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    /// Apple's `{"errorCode": N, "errorMessage": "..."}`, when the body is one.
    static func appleError(_ body: [UInt8]) -> (code: Int64, message: String?)? {
        guard !body.isEmpty, let json = try? StrictJSON(maxBytes: 64 * 1024).parse(body),
              case .int(let code)? = json["errorCode"] else { return nil }
        return (code, json["errorMessage"]?.stringValue)
    }

    private func map(_ gaveUp: RetryGaveUp<AttemptFailure>, call: Call, environment: ServerAPIEnvironment) -> VerificationError {
        let route = "App Store Server API \(call.name) (\(environment.rawValue))"
        switch gaveUp.lastError {
        case .local(let error):
            return error
        case .transport(let error):
            if gaveUp.reason == .notRetryable {
                return VerificationError(.upstreamUnavailable, "\(route): \(error)")
            }
            return VerificationError(.upstreamUnavailable, "\(route): \(error) after \(gaveUp.attempts) attempts",
                                     retryAfterSeconds: defaultRetryAfterSeconds)
        case .apple(let status, let code, let message, let retryAfter):
            let described = "HTTP \(status)" + (code.map { " errorCode \($0)" } ?? "")
                + (message.map { " \"\(ClientExcerpt.of($0, limit: 200))\"" } ?? "")
            if gaveUp.reason != .notRetryable {
                let wait = gaveUp.retryAfter.map { Int($0.components.seconds) } ?? retryAfter ?? defaultRetryAfterSeconds
                let rateLimited = status == 429 || code == AppleErrorCode.rateLimitExceeded
                return VerificationError(rateLimited ? .rateLimited : .upstreamUnavailable,
                                         "\(route): \(described) after \(gaveUp.attempts) attempts",
                                         retryAfterSeconds: max(1, wait))
            }
            if status == 401 {
                return VerificationError(.upstreamCredentialsRejected,
                                         "\(route) rejected the token of key id \(tokenProvider.keyId) (issuer \(tokenProvider.issuerId)): HTTP 401")
            }
            switch code {
            case AppleErrorCode.transactionIdNotFound?, AppleErrorCode.originalTransactionIdNotFound?,
                 AppleErrorCode.accountNotFound?, AppleErrorCode.appTransactionDoesNotExist?:
                return VerificationError(.transactionNotFound, "\(route): \(described)")
            case AppleErrorCode.invalidTransactionId?, AppleErrorCode.invalidOriginalTransactionId?:
                return VerificationError(.malformedRequest, "\(route): \(described)")
            case AppleErrorCode.appNotFound?:
                return VerificationError(.invalidConfiguration, "\(route): \(described) (is the bundle id right?)")
            default:
                return VerificationError(.upstreamUnavailable, "\(route): unexpected answer \(described)")
            }
        }
    }

    // MARK: Response reading

    /// Parses a success body strictly; an answer that is not what Apple documents is refused as
    /// upstream's fault (UPSTREAM_INVALID_RESPONSE, 502), not passed on as the client's malformed input.
    /// `perform`, then the answer's body as a JSON object (what every route but the bodiless PUTs and
    /// POSTs reads).
    func performJSON(_ call: Call, order: ServerAPIEnvironmentOrder) async throws(VerificationError)
        -> (ServerAPIEnvironment, JSONFields) {
        let (environment, response) = try await perform(call, order: order)
        do {
            return (environment, try JSONFields(try StrictJSON().parse(response.body), context: call.name))
        } catch {
            throw VerificationError(.upstreamInvalidResponse, "App Store Server API \(call.name): malformed answer: \(error.message)")
        }
    }

    func read<T>(_ call: Call, _ body: () throws(VerificationError) -> T) throws(VerificationError) -> T {
        do {
            return try body()
        } catch {
            throw VerificationError(.upstreamInvalidResponse, "App Store Server API \(call.name): malformed answer: \(error.message)")
        }
    }
}

extension EnvironmentURLs {
    /// The Server API base URL for `environment`, without a trailing slash (paths start with one).
    func base(_ environment: ServerAPIEnvironment) -> String {
        let url = environment == .production ? production : sandbox
        return url.hasSuffix("/") ? String(url.dropLast()) : url
    }
}
