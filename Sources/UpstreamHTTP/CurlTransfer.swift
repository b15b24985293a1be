import CCurl
import Synchronization

/// One request in flight: owns its header list, error buffer and response buffers.
/// Fields below `continuation` are touched only on the engine thread (and curl's callbacks, which run there).
final class CurlTransfer: @unchecked Sendable {
    let method: String
    let url: String
    let headers: [(String, String)]
    let body: [UInt8]?
    let configuration: UpstreamHTTPConfiguration

    /// Set by the calling task before submission; resumed exactly once by the engine thread.
    var continuation: CheckedContinuation<Result<UpstreamResponse, UpstreamError>, Never>?
    let cancelRequested = Atomic<Bool>(false)

    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var responseHeaders: [String: String] = [:]
    private var responseHeaderBytes = 0
    private var responseBody: [UInt8] = []
    private var exceededLimit = false

    /// Response headers are small from Apple; a peer streaming endless headers is cut off here.
    private static let maxHeaderBytes = 64 * 1024

    init(method: String, url: String, headers: [(String, String)], body: [UInt8]?, configuration: UpstreamHTTPConfiguration) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.configuration = configuration
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    /// Configures a freshly reset easy handle. Every security option is set on every use, so nothing
    /// from a previous transfer on the same handle carries over.
    func configure(_ easy: UnsafeMutableRawPointer) -> CURLcode {
        var failures: [CURLcode] = []
        func long(_ option: CURLoption, _ value: Int) { failures.append(iapgw_curl_setopt_long(easy, option, value)) }
        func string(_ option: CURLoption, _ value: String?) {
            // curl copies string options (since 7.17), so a temporary C string is fine.
            if let value { failures.append(value.withCString { iapgw_curl_setopt_ptr(easy, option, $0) }) }
            else { failures.append(iapgw_curl_setopt_ptr(easy, option, nil)) }
        }
        let config = configuration
        long(CURLOPT_NOSIGNAL, 1)
        string(CURLOPT_URL, url)
        string(CURLOPT_PROTOCOLS_STR, "http,https")
        string(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        long(CURLOPT_FOLLOWLOCATION, 0)
        long(CURLOPT_SSL_VERIFYPEER, 1)
        long(CURLOPT_SSL_VERIFYHOST, 2)
        long(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        // An empty proxy overrides http_proxy/https_proxy from the environment: traffic goes where the URL says.
        string(CURLOPT_PROXY, "")
        if let bundle = config.caBundlePath {
            // The bundle replaces the system store: also clear CAPATH, or /etc/ssl/certs would still be trusted.
            string(CURLOPT_CAINFO, bundle)
            string(CURLOPT_CAPATH, nil)
        }
        long(CURLOPT_CONNECTTIMEOUT_MS, max(1, config.connectTimeout.wholeMillisecondsRoundedUp))
        long(CURLOPT_TIMEOUT_MS, max(1, config.requestTimeout.wholeMillisecondsRoundedUp))
        long(CURLOPT_MAXFILESIZE, config.maxResponseBytes)
        long(CURLOPT_TCP_KEEPALIVE, 1)
        string(CURLOPT_USERAGENT, config.userAgent)
        failures.append(iapgw_curl_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer))

        switch method {
        case "GET": long(CURLOPT_HTTPGET, 1)
        case "HEAD": long(CURLOPT_NOBODY, 1)
        case "POST": long(CURLOPT_POST, 1)
        default: string(CURLOPT_CUSTOMREQUEST, method)
        }
        if let body {
            if method != "POST" { long(CURLOPT_POST, 1); string(CURLOPT_CUSTOMREQUEST, method) }
            long(CURLOPT_POSTFIELDSIZE, body.count)
            // COPYPOSTFIELDS copies the bytes, so the transfer need not pin the Swift array.
            failures.append(body.withUnsafeBytes { iapgw_curl_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress ?? UnsafeRawPointer(errorBuffer)) })
        } else if method == "POST" {
            long(CURLOPT_POSTFIELDSIZE, 0)
        }

        // "Expect:" with no value stops curl from waiting for 100-continue on larger bodies.
        var list: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, "Expect:")
        for (name, value) in headers {
            list = curl_slist_append(list, value.isEmpty ? "\(name);" : "\(name): \(value)")
        }
        headerList = list
        failures.append(iapgw_curl_setopt_ptr(easy, CURLOPT_HTTPHEADER, list))

        let context = Unmanaged.passUnretained(self).toOpaque()
        failures.append(iapgw_curl_setopt_write(easy, CURLOPT_WRITEFUNCTION, curlWriteBody))
        failures.append(iapgw_curl_setopt_ptr(easy, CURLOPT_WRITEDATA, context))
        failures.append(iapgw_curl_setopt_write(easy, CURLOPT_HEADERFUNCTION, curlWriteHeader))
        failures.append(iapgw_curl_setopt_ptr(easy, CURLOPT_HEADERDATA, context))
        return failures.first { $0 != CURLE_OK } ?? CURLE_OK
    }

    fileprivate func appendBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard responseBody.count + bytes.count <= configuration.maxResponseBytes else {
            exceededLimit = true
            return false
        }
        responseBody.append(contentsOf: bytes)
        return true
    }

    fileprivate func appendHeaderLine(_ bytes: UnsafeRawBufferPointer) -> Bool {
        responseHeaderBytes += bytes.count
        guard responseHeaderBytes <= Self.maxHeaderBytes else {
            exceededLimit = true
            return false
        }
        let line = String(decoding: bytes, as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            // A new status line (after 1xx): headers collected so far belonged to an interim response.
            responseHeaders = [:]
            return true
        }
        guard let colon = line.firstIndex(of: ":") else { return true }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty else { return true }
        if let existing = responseHeaders[name] {
            responseHeaders[name] = existing + ", " + value
        } else {
            responseHeaders[name] = value
        }
        return true
    }

    /// Maps curl's outcome. Error texts come from curl's error buffer (host, port, TLS reason); curl never
    /// puts request headers or bodies there.
    func outcome(code: CURLcode, easy: UnsafeMutableRawPointer) -> Result<UpstreamResponse, UpstreamError> {
        if code == CURLE_OK {
            var status = 0
            _ = iapgw_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            return .success(UpstreamResponse(status: status, headers: responseHeaders, body: responseBody))
        }
        let detail = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_WRITE_ERROR where exceededLimit, CURLE_FILESIZE_EXCEEDED:
            return .failure(.responseTooLarge(configuration.maxResponseBytes))
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(.timedOut)
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .failure(.connectFailed(detail))
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
             CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
             CURLE_SSL_CRL_BADFILE, CURLE_SSL_SHUTDOWN_FAILED:
            return .failure(.tlsFailure(detail))
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return .failure(.invalidURL(detail))
        default:
            return .failure(.transport(detail))
        }
    }
}

/// C callbacks: no captures, the transfer arrives as userdata. Returning a short count aborts the transfer.
private let curlWriteBody: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    curlDeliver(data, size, count, context) { transfer, chunk in transfer.appendBody(chunk) }
}

private let curlWriteHeader: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    curlDeliver(data, size, count, context) { transfer, chunk in transfer.appendHeaderLine(chunk) }
}

/// What both write callbacks do: hand libcurl's chunk to the transfer behind `context`, and answer
/// the whole length if it was taken (a short count, 0, aborts).
private func curlDeliver(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?,
                         _ take: (CurlTransfer, UnsafeRawBufferPointer) -> Bool) -> Int {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard length > 0, let data else { return length }
    return take(transfer, UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}
