import CommandLineSupport
import Foundation
import LoadPacer

/// `iapgw-dev pace`: an evenly paced, open-loop load on a loopback URL (Benchmarks/verify-load.sh's
/// fixed-rate rows). `hey -q` paces each of its workers separately and they tick together, so its
/// "fixed rate" arrives in bursts of one request per worker (Benchmarks/README.md); this one sends
/// request i at t0 + i / rate and measures it from then.
struct PaceCommand: Subcommand {
    let name = "pace"
    let summary = "benchmark: evenly paced open-loop HTTP load on loopback (latency from each request's due time)"
    let usage = """
        usage: iapgw-dev pace --url URL --rate R --seconds N [--connections C] [--body FILE | --bodies FILE] [--method M]
                              [--header 'Name: value']... [--timeout S] [--max-response-bytes B]
                              [--max-lag-ms L] [--csv FILE] [--json FILE]
          --url        http://127.0.0.1:PORT/... or http://[::1]:PORT/... (loopback only)
          --rate       requests per second, request i due at t0 + i / R
          --connections  kept-alive connections, the most requests outstanding (default 64)
          --body       the request body (the same for every request); the method is then POST
          --bodies     one body per line (LF, at most 1 MiB each), request i sends line i: no body is sent twice,
                       and a run of more requests than the file has lines is refused; the method is then POST
          --timeout    seconds a request may take from its send (default 10)
          --max-lag-ms the generator's own p99 lateness above which the figure is refused (default 1)
          --csv        every request: index, due, sent and done (ms from t0), latency, the generator's lag (ms), status, failure
          --json       the summary as a JSON object (t0_monotonic_ns: t0 on CLOCK_MONOTONIC, as `perf trace -p` stamps)
        Exit 1 when the generator could not keep its own schedule (the figure would measure it).
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        guard let url = try args.value("--url") else { throw UsageError(message: "--url is required") }
        let rate = try Self.positive(args.value("--rate"), "--rate")
        let seconds = try Self.positive(args.value("--seconds"), "--seconds")
        let connections = try args.positiveCount("--connections", default: 64)
        let bodyPath = try args.value("--body")
        let bodiesPath = try args.value("--bodies")
        let method = try args.value("--method") ?? (bodyPath == nil && bodiesPath == nil ? "GET" : "POST")
        let headers = try args.values("--header")
        let timeout = try Self.positive(args.value("--timeout") ?? "10", "--timeout")
        let maxResponse = try args.positiveCount("--max-response-bytes", default: 1 << 20)
        let maxLag = try Self.positive(args.value("--max-lag-ms") ?? "1", "--max-lag-ms")
        let csvPath = try args.value("--csv")
        let jsonPath = try args.value("--json")
        try args.finish()
        guard rate * seconds >= 1 else { throw UsageError(message: "--rate × --seconds must make at least one request") }
        guard bodyPath == nil || bodiesPath == nil else { throw UsageError(message: "--body and --bodies: one or the other") }

        let options = Pacer.Options(rate: rate, connections: connections, seconds: seconds, timeoutSeconds: timeout,
                                    maxResponseBytes: maxResponse)
        let paced: @Sendable () throws(BodiesFile.Refused) -> Pacer.Run
        do {
            let target = try LoopbackTarget(url: url)
            if let bodiesPath {
                let head = try target.head(method: method, headers: headers)
                let bodies = try BodiesFile(path: bodiesPath)
                paced = { () throws(BodiesFile.Refused) in try Pacer.run(target, head: head, bodies: bodies, options: options) }
            } else {
                let body = try bodyPath.map { try [UInt8](Data(contentsOf: URL(fileURLWithPath: $0))) } ?? []
                let request = try target.request(method: method, headers: headers, body: body)
                paced = { Pacer.run(target, request: request, options: options) }
            }
        } catch let refused as LoopbackTarget.Refused {
            throw UsageError(message: refused.reason)
        } catch let refused as BodiesFile.Refused {
            throw UsageError(message: refused.reason)
        }
        let run: Pacer.Run
        do {
            run = try await Self.onOwnThread(paced)
        } catch {
            throw UsageError(message: "\(bodiesPath ?? ""): \(error.reason)")
        }
        let summary = PaceSummary(run, maxLagMs: maxLag)
        print(Self.text(summary, connections: connections, firstProtocolError: run.firstProtocolError))
        if let csvPath { try Self.csv(run).write(toFile: csvPath, atomically: true, encoding: .utf8) }
        if let jsonPath { try Self.json(summary).write(toFile: jsonPath, atomically: true, encoding: .utf8) }
        return summary.keptPace ? 0 : 1
    }

    private static func positive(_ text: String?, _ name: String) throws(UsageError) -> Double {
        guard let text else { throw UsageError(message: "\(name) is required") }
        guard let value = Double(text), value.isFinite, value > 0 else { throw UsageError(message: "\(name) must be a positive number") }
        return value
    }

    /// The run blocks in ppoll for its whole length: a thread of its own, not a cooperative one.
    private static func onOwnThread(_ body: @escaping @Sendable () throws(BodiesFile.Refused) -> Pacer.Run) async throws(BodiesFile.Refused) -> Pacer.Run {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Pacer.Run, BodiesFile.Refused>, Never>) in
            let thread = Thread { continuation.resume(returning: Result { () throws(BodiesFile.Refused) in try body() }) }
            thread.name = "iapgw-dev pace"
            thread.start()
        }
        return try result.get()
    }

    private static func ms(_ value: Double) -> String { String(format: "%.3f", value) }

    static func text(_ s: PaceSummary, connections: Int, firstProtocolError: String?) -> String {
        var lines = [
            "paced \(s.requests) requests at \(Int(s.offeredPerSecond.rounded()))/s on \(connections) connections: "
                + "achieved \(Int(s.achievedPerSecond.rounded()))/s",
            "latency from due time: p50 \(ms(s.p50)) ms, p99 \(ms(s.p99)) ms, p99.9 \(ms(s.p999)) ms, max \(ms(s.max)) ms "
                + "(from send: p50 \(ms(s.serviceP50)) ms, p99 \(ms(s.serviceP99)) ms)",
            "errors \(s.errors): non-2xx \(s.non2xx), timeouts \(s.timeouts), closed \(s.closed), bad responses \(s.badResponses), "
                + "not sent \(s.notSent), connect failures \(s.connectFailures)",
            "generator lag: p99 \(ms(s.lagP99)) ms, max \(ms(s.lagMax)) ms",
        ]
        if let firstProtocolError { lines.append("first bad response: \(firstProtocolError)") }
        if !s.keptPace {
            lines.append("REFUSED: the generator's own p99 lag is over \(ms(s.maxLagMs)) ms; this run measured the generator")
        }
        return lines.joined(separator: "\n")
    }

    static func csv(_ run: Pacer.Run) -> String {
        var out = "index,due_ms,sent_ms,done_ms,latency_ms,lag_ms,status,failure\n"
        out.reserveCapacity(run.records.count * 48)
        func at(_ t: Int64) -> String { t < 0 ? "" : ms(Double(t) / 1e6) }
        for (i, r) in run.records.enumerated() {
            let latency = r.done < 0 ? "" : ms(Double(r.done - r.due) / 1e6)
            let failure = r.failure.map { "\($0)" } ?? ""
            let lag = r.sent < 0 ? "" : ms(Double(r.lag) / 1e6)
            out += "\(i),\(at(r.due)),\(at(r.sent)),\(at(r.done)),\(latency),\(lag),\(r.status),\(failure)\n"
        }
        return out
    }

    static func json(_ s: PaceSummary) -> String {
        func number(_ v: Double) -> String { v.isFinite ? ms(v) : "null" }
        return """
            {"offered_per_s":\(number(s.offeredPerSecond)),"achieved_per_s":\(number(s.achievedPerSecond)),"requests":\(s.requests),\
            "p50_ms":\(number(s.p50)),"p99_ms":\(number(s.p99)),"p999_ms":\(number(s.p999)),"max_ms":\(number(s.max)),\
            "service_p50_ms":\(number(s.serviceP50)),"service_p99_ms":\(number(s.serviceP99)),"errors":\(s.errors),\
            "non2xx":\(s.non2xx),"timeouts":\(s.timeouts),"closed":\(s.closed),"bad_responses":\(s.badResponses),\
            "not_sent":\(s.notSent),"connect_failures":\(s.connectFailures),\
            "generator_lag_p99_ms":\(number(s.lagP99)),"generator_lag_max_ms":\(number(s.lagMax)),"kept_pace":\(s.keptPace),\
            "t0_monotonic_ns":\(s.t0MonotonicNanoseconds)}

            """
    }
}
