import Synchronization

/// Counters and latency histograms for `/metrics` (Prometheus text format). Labels are route
/// names, status codes and error codes only: bounded sets, never ids or accounts.
public final class GatewayMetrics: Sendable {
    static let bucketsMicros: [UInt64] = [250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000]

    private struct Histogram {
        var buckets = [UInt64](repeating: 0, count: GatewayMetrics.bucketsMicros.count)
        var count: UInt64 = 0
        var sumMicros: UInt64 = 0
    }

    private struct State {
        var requests: [String: UInt64] = [:]       // "route|status"
        var latency: [String: Histogram] = [:]     // route
        var refusals: [String: UInt64] = [:]       // error code
    }

    private let state = Mutex(State())

    public init() {}

    func record(route: String, status: Int, micros: UInt64) {
        state.withLock { s in
            s.requests["\(route)|\(status)", default: 0] += 1
            var h = s.latency[route] ?? Histogram()
            for (i, bound) in Self.bucketsMicros.enumerated() where micros <= bound { h.buckets[i] += 1 }
            h.count += 1
            h.sumMicros += micros
            s.latency[route] = h
        }
    }

    func recordRefusal(code: String) {
        state.withLock { $0.refusals[code, default: 0] += 1 }
    }

    public func prometheusText() -> String {
        let s = state.withLock { $0 }
        var out = "# HELP iapgw_http_requests_total HTTP requests by route and status.\n# TYPE iapgw_http_requests_total counter\n"
        for key in s.requests.keys.sorted() {
            let parts = key.split(separator: "|")
            out += "iapgw_http_requests_total{route=\"\(parts[0])\",status=\"\(parts[1])\"} \(s.requests[key]!)\n"
        }
        out += "# HELP iapgw_http_request_duration_seconds Request latency by route.\n# TYPE iapgw_http_request_duration_seconds histogram\n"
        for route in s.latency.keys.sorted() {
            let h = s.latency[route]!
            for (i, bound) in Self.bucketsMicros.enumerated() {
                out += "iapgw_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"\(Double(bound) / 1e6)\"} \(h.buckets[i])\n"
            }
            out += "iapgw_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"+Inf\"} \(h.count)\n"
            out += "iapgw_http_request_duration_seconds_sum{route=\"\(route)\"} \(Double(h.sumMicros) / 1e6)\n"
            out += "iapgw_http_request_duration_seconds_count{route=\"\(route)\"} \(h.count)\n"
        }
        out += "# HELP iapgw_verification_refusals_total Refused verifications by error code.\n# TYPE iapgw_verification_refusals_total counter\n"
        for code in s.refusals.keys.sorted() {
            out += "iapgw_verification_refusals_total{code=\"\(code)\"} \(s.refusals[code]!)\n"
        }
        return out
    }
}
