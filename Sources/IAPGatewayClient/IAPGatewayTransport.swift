import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP exchange with the gateway, as the client needs it.
public struct IAPGatewayHTTPRequest: Sendable {
    public var method: String
    public var url: URL
    public var headers: [String: String]
    public var body: Data?
    /// The client's whole-request timeout; a transport may use it as its own bound too.
    public var timeout: Duration
}

public struct IAPGatewayHTTPResponse: Sendable {
    public var status: Int
    /// Lowercased header names.
    public var headers: [String: String]
    public var body: Data

    public init(status: Int, headers: [String: String], body: Data) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }
}

/// How requests reach the gateway. The default is URLSession; a backend that must trust a private
/// CA on Linux (where URLSession trusts only the system's store) or that has an HTTP client of its
/// own (AsyncHTTPClient, libcurl) supplies its own.
public protocol IAPGatewayTransport: Sendable {
    func send(_ request: IAPGatewayHTTPRequest) async throws -> IAPGatewayHTTPResponse
}

/// URLSession, on a session that follows no redirect: the gateway never sends one, and following it
/// would carry the API key to wherever it points. A 3xx comes back as an unexpected answer.
public struct URLSessionTransport: IAPGatewayTransport {
    private let session: URLSession

    public init() {
        self.session = URLSession(configuration: .ephemeral, delegate: NoRedirects(), delegateQueue: nil)
    }

    /// A session of your own (its redirect policy is yours).
    public init(session: URLSession) { self.session = session }

    public func send(_ request: IAPGatewayHTTPRequest) async throws -> IAPGatewayHTTPResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        // A second past the client's own bound, so that bound, not URLSession's, names the timeout
        // (whole seconds: a fraction is cut off on Linux).
        urlRequest.timeoutInterval = (request.timeout / .seconds(1)).rounded(.up) + 1
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: urlRequest)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        return IAPGatewayHTTPResponse(status: http.statusCode, headers: headers, body: data)
    }
}

private final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}
