import AppReceipts
import AppleTrust
import CommandLineSupport
import Foundation
import IAPCore
import TestPKI

/// `iapgw-dev bench`: how fast verification runs here, as ratios to the cryptography underneath it
/// (`openssl speed ecdsap256`, measured in the same run on the same core). Single-threaded.
struct BenchCommand: Subcommand {
    let name = "bench"
    let summary = "measure verification speed against openssl speed ecdsap256 (and Apple's Python library)"
    let usage = """
        usage: iapgw-dev bench [--seconds N] [--vectors DIR] [--python PYTHON] [--results FILE]
               iapgw-dev bench --profile jws-warm|jws-memo|jws-cold|receipt-parse|receipt --calls N [--vectors DIR]
               iapgw-dev bench --profile NAME --seconds N [--vectors DIR]
          --seconds   per measurement (default 3)
          --vectors   Apple's real vectors (default ../shared/testdata/apple-real or $IAPGW_APPLE_REAL)
          --python    a Python with app-store-server-library (Benchmarks/setup_python_peer.sh) to measure as a peer
          --results   where to write the JSON results (default Benchmarks/results/bench-<time>.json)
          --profile   run only this workload, exactly N checked calls, no timing (under perf or callgrind);
                      with --seconds and no --calls: only this workload, timed (wall and CPU calls/s)
        """

    func run(_ args: inout CommandLineArguments) throws -> Int32 {
        let secondsGiven = try args.value("--seconds")
        let seconds = try secondsGiven.map { text throws(UsageError) -> Double in
            guard let s = Double(text), s > 0, s <= 600 else { throw UsageError(message: "--seconds must be in (0, 600]") }
            return s
        } ?? 3
        let vectors = try args.value("--vectors").map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? AppleRealVectors.directory
        let python = try args.value("--python")
        let resultsPath = try args.value("--results")
        let profile = try args.value("--profile")
        let callsGiven = try args.value("--calls")
        let calls = try callsGiven.map { text throws(UsageError) -> Int in
            guard let n = Int(text), n > 0 else { throw UsageError(message: "--calls must be a positive integer") }
            return n
        } ?? 1000
        try args.finish()

        var results = Results(seconds: seconds)
        let read = { (name: String) throws -> Data in try Data(contentsOf: vectors.appendingPathComponent(name)) }
        let workloads = try Workloads(read: read)
        if let profile {
            guard let body = workloads.named[profile] else { throw UsageError(message: "unknown --profile \(profile)") }
            if secondsGiven != nil && callsGiven == nil {  // one workload timed alone (Benchmarks/apple-swift-peer.sh)
                guard let (n, wall, cpu) = timedLoop(seconds, body) else { print("\(profile): FAILED"); return 1 }
                print(String(format: "\(profile): wall %.1f /s, cpu %.1f /s (%d calls)", Double(n) / wall, Double(n) / cpu, n))
                return 0
            }
            var failures = 0
            for _ in 0..<calls where !body() { failures += 1 }
            print("\(profile): \(calls) calls, \(failures) failed")
            return failures == 0 ? 0 : 1
        }

        // 1. The physical baseline: OpenSSL's own ECDSA P-256 verify loop on one core.
        results.opensslVerifyPerSecond = try Self.opensslSpeedVerify(seconds: seconds)
        report("openssl speed ecdsap256 verify", results.opensslVerifyPerSecond, baseline: nil)
        // The cold JWS path's floor: two P-384 verifies (the chain) and one P-256 (the signature).
        results.opensslP384VerifyPerSecond = try Self.opensslSpeedVerify(seconds: seconds, curve: 384)
        report("openssl speed ecdsap384 verify", results.opensslP384VerifyPerSecond, baseline: nil)

        // 2. The same operation from Swift (one ES256 verify of a 1 KiB message).
        let key = try ECPrivateKey.generate(.p256)
        let message = [UInt8](repeating: 0x5A, count: 1024)
        let signature = try key.signES256(message)
        let publicKey = key.publicKey
        results.swiftES256VerifyPerSecond = measure(seconds) { publicKey.verifyES256(signature: signature, message: message) }
        report("ES256 verify from Swift", results.swiftES256VerifyPerSecond, baseline: results.opensslVerifyPerSecond)

        // 3. Apple's real StoreKit 2 transaction, verified end to end at its signedDate.
        results.jwsWarmPerSecond = measure(seconds, workloads.jwsWarm)
        report("JWS verify, warm chain cache", results.jwsWarmPerSecond, baseline: results.opensslVerifyPerSecond)
        results.jwsMemoHitPerSecond = measure(seconds, workloads.jwsMemoHit)
        report("JWS again, signature memo hit (no verify)", results.jwsMemoHitPerSecond, baseline: results.opensslVerifyPerSecond)
        results.jwsColdPerSecond = measure(seconds, workloads.jwsCold)
        report("JWS verify, no chain cache", results.jwsColdPerSecond, baseline: results.opensslVerifyPerSecond)
        // The cold row against its floor measured in this process, chunks of each alternated: the
        // openssl speed runs above and the cold loop are seconds apart, and on a shared machine the
        // load between them moves the ratio more than either figure moves on its own.
        let p384 = try RawECDSAVerify(curve: "P-384"), p256 = try RawECDSAVerify(curve: "P-256")
        if let (cold, floor) = measureAlternating(seconds, workloads.jwsCold, { p384.verify() && p384.verify() && p256.verify() }) {
            results.jwsColdAlternatedSeconds = cold
            results.floorAlternatedSeconds = floor
            let figures = String(format: "%.0f µs vs %.0f µs (%.2f×)", cold * 1e6, floor * 1e6, cold / floor)
            print("\("JWS cold ÷ 2 × P-384 + P-256, alternated".padding(toLength: 44, withPad: " ", startingAt: 0)) \(figures)")
        }

        // 4. Apple's real 187-record sandbox receipt: parsed, and parsed + PKCS#7-verified at creation date.
        let records = workloads.receiptRecords
        results.receiptRecords = records
        results.receiptParsePerSecond = measure(seconds, workloads.receiptParse)
        report("receipt parse (\(records) records)", results.receiptParsePerSecond, baseline: results.opensslVerifyPerSecond)
        results.receiptVerifyPerSecond = measure(seconds, workloads.receiptVerify)
        report("receipt parse + verify (\(records) records)", results.receiptVerifyPerSecond,
               baseline: results.opensslVerifyPerSecond)

        // 5. Apple's official Python library on the same inputs, as a peer (outside the product).
        if let python {
            let peer = try Self.pythonPeer(python: python, vectors: vectors, seconds: seconds)
            results.python = peer
            print("")
            print("Apple's Python library (\(peer["library"]?.stringValue ?? "?")), same inputs:")
            for (label, key, ours) in [("JWS verify", "jws_transaction_per_s", results.jwsWarmPerSecond),
                                       ("receipt transaction-id extraction (no signature check)", "receipt_extract_per_s",
                                        results.receiptVerifyPerSecond)] {
                guard case .double(let theirs)? = peer[key] else { print("  \(label): not measured"); continue }
                print("  \(label): \(Self.format(theirs))/s; iapgw is \(String(format: "%.1f", ours / theirs))x")
            }
        }

        let url = URL(fileURLWithPath: resultsPath ?? "Benchmarks/results/bench-\(Int(Date().timeIntervalSince1970)).json")
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data((results.json.jsonText + "\n").utf8).write(to: url)
        print("\nresults written to \(url.path)")
        return 0
    }

    /// The timed calls of rows 3 and 4, each answering whether it gave the expected result.
    struct Workloads {
        let jwsWarm: () -> Bool
        let jwsMemoHit: () -> Bool
        let jwsCold: () -> Bool
        let receiptParse: () -> Bool
        let receiptVerify: () -> Bool
        let receiptRecords: Int

        var named: [String: () -> Bool] {
            ["jws-warm": jwsWarm, "jws-memo": jwsMemoHit, "jws-cold": jwsCold, "receipt-parse": receiptParse, "receipt": receiptVerify]
        }

        init(read: (String) throws -> Data) throws {
            let jws = String(decoding: try read(AppleRealVectors.sandboxConsumableTransaction), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let root = try read(AppleRealVectors.appleRootG3)
            func verifier(cache: Int, signatureMemo: Int = 0) throws -> SignedDataVerifier {
                try SignedDataVerifier(rootCertificates: [root], bundleId: "com.goodheartapp", appAppleId: nil,
                                       environments: [.sandbox], cacheCapacity: cache, signatureMemoCapacity: signatureMemo)
            }
            // Row 1 is "JWS verify/s": the warm loop presents one JWS again and again, so it runs
            // without the memo of verified signatures, which would otherwise answer every call
            // without a verify. The memo hit (a re-claim's path) is its own row.
            let warm = try verifier(cache: 64)
            // Primes the chain cache (and fails loudly if it can't verify); every timed call must give this id.
            let transactionId = try warm.verifyAndDecodeTransaction(jws).transactionId
            jwsWarm = { (try? warm.verifyAndDecodeTransaction(jws))?.transactionId == transactionId }
            let memo = try verifier(cache: 64, signatureMemo: SignedDataVerifier.defaultSignatureMemoCapacity)
            _ = try memo.verifyAndDecodeTransaction(jws)
            jwsMemoHit = { (try? memo.verifyAndDecodeTransaction(jws))?.transactionId == transactionId }
            let cold = try verifier(cache: 0)
            jwsCold = { (try? cold.verifyAndDecodeTransaction(jws))?.transactionId == transactionId }

            let receipt = String(decoding: try read(AppleRealVectors.receiptSandboxLegacy), as: UTF8.self)
            let reader = try AppReceiptReader(roots: [try read(AppleRealVectors.appleIncRoot)])
            let records = try reader.read(base64: receipt).receipt.inAppPurchases.count
            receiptRecords = records
            receiptParse = { (try? AppReceipt.parseUnverified(pkcs7: StrictBase64.decode(receipt)))?.inAppPurchases.count == records }
            receiptVerify = { (try? reader.read(base64: receipt))?.receipt.inAppPurchases.count == records }
        }
    }

    struct Results {
        var seconds: Double
        var opensslVerifyPerSecond = 0.0
        var opensslP384VerifyPerSecond = 0.0
        var swiftES256VerifyPerSecond = 0.0
        var jwsWarmPerSecond = 0.0
        var jwsMemoHitPerSecond = 0.0
        var jwsColdPerSecond = 0.0
        /// CPU seconds per cold call and per floor (2 × P-384 + 1 × P-256 raw verify), alternated.
        var jwsColdAlternatedSeconds = 0.0
        var floorAlternatedSeconds = 0.0
        var receiptRecords = 0
        var receiptParsePerSecond = 0.0
        var receiptVerifyPerSecond = 0.0
        var python: [String: JSONValue]?

        var json: JSONValue {
            var o: [String: JSONValue] = [
                "seconds_per_measurement": .double(seconds),
                "openssl_speed_ecdsap256_verify_per_s": .double(opensslVerifyPerSecond),
                "openssl_speed_ecdsap384_verify_per_s": .double(opensslP384VerifyPerSecond),
                "swift_es256_verify_per_s": .double(swiftES256VerifyPerSecond),
                "jws_warm_per_s": .double(jwsWarmPerSecond),
                "jws_memo_hit_per_s": .double(jwsMemoHitPerSecond),
                "jws_cold_per_s": .double(jwsColdPerSecond),
                "jws_cold_alternated_us": .double(jwsColdAlternatedSeconds * 1e6),
                "floor_2p384_p256_alternated_us": .double(floorAlternatedSeconds * 1e6),
                "jws_warm_ratio_to_openssl": .double(jwsWarmPerSecond / opensslVerifyPerSecond),
                "jws_cold_ratio_to_openssl": .double(jwsColdPerSecond / opensslVerifyPerSecond),
                "receipt_records": .int(Int64(receiptRecords)),
                "receipt_parse_per_s": .double(receiptParsePerSecond),
                "receipt_parse_verify_per_s": .double(receiptVerifyPerSecond),
                "cores": .int(Int64(ProcessInfo.processInfo.activeProcessorCount)),
            ]
            if let python { o["python_peer"] = .object(python) }
            return .object(o)
        }
    }

    /// Calls `body` in a loop for `seconds` and returns calls per second of this thread's CPU time
    /// (the clock read every 50 calls): `openssl speed` divides by its CPU (user) time too, so the
    /// ratio holds on a loaded machine, where wall time would count other processes' turns.
    /// `body` answers whether its call gave the expected result: a loop with any wrong or failed
    /// call reports no rate (0, printed as "FAILED"), never the speed of failing.
    func measure(_ seconds: Double, _ body: () -> Bool) -> Double {
        guard let (count, _, cpu) = timedLoop(seconds, body) else { return 0 }
        return Double(count) / cpu
    }

    /// `measure`'s loop: the calls timed (after 50 of warm-up), their wall and thread CPU seconds, or
    /// nil (printed as such) if any call failed.
    func timedLoop(_ seconds: Double, _ body: () -> Bool) -> (calls: Int, wall: Double, cpu: Double)? {
        var failures = 0
        for _ in 0..<50 where !body() { failures += 1 }  // warm-up
        let start = DispatchTime.now().uptimeNanoseconds
        let deadline = start + UInt64(seconds * 1e9)
        let cpuStart = Self.threadCPUSeconds()
        var count = 0
        var now = start
        repeat {
            for _ in 0..<50 where !body() { failures += 1 }
            count += 50
            now = DispatchTime.now().uptimeNanoseconds
        } while now < deadline
        let cpu = Self.threadCPUSeconds() - cpuStart
        guard failures == 0 else {
            print("  \(failures) of \(count + 50) calls failed or gave a wrong result: no rate")
            return nil
        }
        return (count, Double(now - start) / 1e9, cpu)
    }

    /// `a` and `b` in alternating chunks of 100 calls until they have used `seconds` of this
    /// thread's CPU together, each chunk's CPU time counted to its side: CPU seconds per call of
    /// each, or nil (printed as such) if any call failed. Chunks of 20 made the cold JWS calls 1–10%
    /// slower than in their own loop (likely caches re-warming at each switch); chunks of 100 did not.
    func measureAlternating(_ seconds: Double, _ a: () -> Bool, _ b: () -> Bool) -> (Double, Double)? {
        var failures = 0
        for _ in 0..<5 where !(a() && b()) { failures += 1 }  // warm-up
        var timeA = 0.0, timeB = 0.0, count = 0
        repeat {
            let start = Self.threadCPUSeconds()
            for _ in 0..<100 where !a() { failures += 1 }
            let middle = Self.threadCPUSeconds()
            for _ in 0..<100 where !b() { failures += 1 }
            timeA += middle - start
            timeB += Self.threadCPUSeconds() - middle
            count += 100
        } while timeA + timeB < seconds
        guard failures == 0 else {
            print("  \(failures) alternated calls failed or gave a wrong result: no ratio")
            return nil
        }
        return (timeA / Double(count), timeB / Double(count))
    }

    static func threadCPUSeconds() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    func report(_ label: String, _ perSecond: Double, baseline: Double?) {
        guard perSecond > 0 else { print("\(label.padding(toLength: 44, withPad: " ", startingAt: 0))     FAILED"); return }
        let ratio = baseline.map { String(format: "  (%.0f%% of openssl verify)", 100 * perSecond / $0) } ?? ""
        print("\(label.padding(toLength: 44, withPad: " ", startingAt: 0)) \(Self.format(perSecond).leftPadded(10))/s\(ratio)")
    }

    static func format(_ v: Double) -> String { v >= 100 ? String(format: "%.0f", v) : String(format: "%.1f", v) }

    /// Runs `openssl speed -seconds N ecdsap256` and reads the verify/s column.
    static func opensslSpeedVerify(seconds: Double, curve: Int = 256) throws -> Double {
        // It signs for N seconds, then verifies for N: a deadline of 4 N + 30 s.
        let whole = max(1, Int(seconds.rounded()))
        let output = try runProcess("/usr/bin/env", ["openssl", "speed", "-seconds", String(whole), "ecdsap\(curve)"],
                                    deadline: .seconds(4 * whole + 30))
        for line in output.split(separator: "\n") where line.contains("ecdsa (nistp\(curve))") {
            if let last = line.split(separator: " ").last, let v = Double(last) { return v }
        }
        throw UsageError(message: "could not read the verify rate from `openssl speed ecdsap\(curve)`")
    }

    static func pythonPeer(python: String, vectors: URL, seconds: Double) throws -> [String: JSONValue] {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Benchmarks/peer_python.py").path
        // Three measurements of `seconds` each, plus the library's import and set-up.
        let output = try runProcess("/usr/bin/env", [python, script, "--vectors", vectors.path, "--seconds", String(seconds)],
                                    deadline: .seconds(6 * seconds + 60))
        guard case .object(let o) = try StrictJSON().parse(output) else {
            throw UsageError(message: "the Python peer did not print a JSON object")
        }
        return o
    }

    /// A helper program run to completion within `deadline` (ChildProcess: a clean signal mask, so
    /// `openssl speed`'s alarm fires even when spawned from the task pool; killed if it overruns).
    static func runProcess(_ executable: String, _ arguments: [String], deadline: Duration) throws -> String {
        do {
            return try ChildProcess.run(executable, arguments, deadline: deadline)
        } catch let failure as ChildProcess.Failure {
            throw UsageError(message: failure.description)
        }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
