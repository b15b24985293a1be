// libFuzzer target: App Store Server API answers as the gateway's client reads them. A loopback
// HTTP server answers every call with the status, header fields and body taken from the input; the
// client (real libcurl, real retry and sandbox-fallback logic, no sleeping) calls the route the
// first byte picks and reads the envelope: JSON shape, signed strings, paging, Apple's error codes,
// Retry-After. Every header value also goes through HTTPDate and RetryAfter directly, whose answer
// must be a number of seconds within 0...RetryAfter.maximumSeconds. Any outcome but a
// VerificationError or a value is a bug.
//
// Input: route byte, then "STATUS\n", header lines "Name: value\n", an empty line, the body.
// Seeds: envelopes around Apple's real signed transaction (Scripts/fuzz.sh). Run: Scripts/fuzz.sh 60 FuzzServerAPI
import Adapters
import Dispatch
import Foundation
import HTTPServer
@testable import IAPConfig
import IAPCore
import Synchronization
import UpstreamHTTP

/// What the loopback server answers with, set before each input's calls.
let answer = Mutex(HTTPResponse(status: 200))

let server: HTTPServer = {
    do {
        let server = try HTTPServer(configuration: HTTPServerConfiguration(port: 0)) { _ in answer.withLock { $0 } }
        try server.start()
        return server
    } catch {
        fatalError("FuzzServerAPI setup: \(error)")
    }
}()

struct FixedToken: ServerAPITokenProviding {
    let keyId = "FUZZKEY001"
    let issuerId = "57246542-96fe-1a63-e053-0824d011072a"
    func bearerToken() throws(VerificationError) -> String { "fuzz.token.value" }
}

let client: AppStoreServerAPIClient = {
    let base = "http://127.0.0.1:\(server.port)"
    do {
        let upstream = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(
            connectTimeout: .seconds(2), requestTimeout: .seconds(5), maxResponseBytes: 1 << 20))
        return AppStoreServerAPIClient(
            baseURLs: .init(production: base, sandbox: base), tokenProvider: FixedToken(), upstream: upstream,
            retryPolicy: RetryPolicy(maxAttempts: 2, baseDelay: .milliseconds(1), maxDelay: .milliseconds(1)),
            maxPages: 3, sleep: { _ in })
    } catch {
        fatalError("FuzzServerAPI setup: \(error)")
    }
}()

/// Header fields the transport owns (framing, connection): an answer may not set them here.
let transportFields: Set<String> = ["content-length", "transfer-encoding", "connection", "keep-alive", "date"]

/// The response the input describes; a status this test cannot serve (1xx, 204, 304, garbage) is 200.
func response(_ bytes: ArraySlice<UInt8>) -> HTTPResponse {
    var lines = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 64, omittingEmptySubsequences: false)[...]
    let statusText = lines.popFirst().map { String(decoding: $0, as: UTF8.self) } ?? ""
    let status = Int(statusText).flatMap { (200...599).contains($0) && $0 != 204 && $0 != 304 ? $0 : nil } ?? 200
    var headers: [(String, String)] = []
    while let line = lines.first, !line.isEmpty {
        lines.removeFirst()
        let text = String(decoding: line, as: UTF8.self)
        guard let colon = text.firstIndex(of: ":") else { continue }
        let name = String(text[..<colon]), value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }),
              value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }), !transportFields.contains(name.lowercased()) else { continue }
        headers.append((name, value))
    }
    if !lines.isEmpty { lines.removeFirst() }
    let body = Array(lines.joined(separator: [UInt8(ascii: "\n")]))
    return HTTPResponse(status: status, headers: headers, body: body)
}

/// Runs `body` to completion from the fuzzer's thread (not a cooperative-pool thread).
func wait(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task { await body(); done.signal() }
    done.wait()
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let reply = response(input[1...])
    let now = 1_445_412_480.0  // 2015-10-21T07:28:00Z, the seeds' Retry-After date
    for (_, value) in reply.headers {
        _ = HTTPDate.parse(value)
        if let seconds = RetryAfter.seconds(from: value, nowUnixTime: now) {
            precondition((0...RetryAfter.maximumSeconds).contains(seconds), "Retry-After \(value) gave \(seconds) s")
        }
    }
    _ = UpstreamResponse(status: reply.status, headers: Dictionary(reply.headers, uniquingKeysWith: { a, _ in a }),
                         body: reply.body).retryAfterSeconds(nowUnixTime: now)
    answer.withLock { $0 = reply }
    let route = input[0] % 6
    wait {
        let id = "2000000847061981"
        switch route {
        case 0: _ = try? await client.getTransactionInfo(transactionId: id, order: .productionThenSandbox)
        case 1: _ = try? await client.getTransactionHistory(transactionId: id, order: .productionThenSandbox)
        case 2: _ = try? await client.getAllSubscriptionStatuses(transactionId: id)
        case 3: _ = try? await client.lookUpOrderId("MK5TTTVWJH")
        case 4: _ = try? await client.getTransactionHistory(transactionId: id, revision: "r0")
        default: _ = try? await client.getNotificationHistory(startDate: 1, endDate: 2, paginationToken: "p")
        }
    }
    return 0
}
