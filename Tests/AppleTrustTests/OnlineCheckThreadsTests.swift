import AppleTrust
import Foundation
import IAPCore
import Synchronization
import TestPKI
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Verifications with online checks await their OCSP answers on the one HTTP stack: a verification
/// waiting on a silent responder holds no thread at all, so however many wait, the cooperative pool
/// keeps running other work and the process does not grow a thread per waiter.
final class OnlineCheckThreadsTests: XCTestCase {
    /// The default transport, sent to `url` whatever the certificate names; counts the requests
    /// waiting in it.
    final class RedirectedTransport: OCSPTransport {
        let url: URL
        let waiting = Atomic<Int>(0)
        init(url: URL) { self.url = url }

        func post(_ body: Data, to _: URL, timeout _: Duration) async throws(VerificationError) -> Data {
            waiting.add(1, ordering: .sequentiallyConsistent)
            defer { waiting.subtract(1, ordering: .sequentiallyConsistent) }
            // Only cancellation ends these requests in the test (the client's ceiling is a minute): no
            // timeout decides its outcome.
            return try await UpstreamOCSPTransport().post(body, to: url, timeout: .seconds(120))
        }
    }

    func testManyChecksWaitingOnASilentResponderHoldNoThread() async throws {
        let responder = try SilentResponder()
        defer { responder.stop() }
        let ca = try TestPKI.CertificateAuthority.make(intermediateOCSPURL: "http://ocsp.test.invalid/root")
        let transport = RedirectedTransport(url: URL(string: "http://127.0.0.1:\(responder.port)/ocsp")!)
        let verifier = try SignedDataVerifier(rootCertificates: [ca.root.der], bundleId: Fixture.bundleId, appAppleId: nil,
                                              environments: [.sandbox], enableOnlineChecks: true, now: { Fixture.now },
                                              ocspTransport: transport)
        let leaf = try ca.issueLeaf(validity: .around(Fixture.now, days: 30), ocspURL: "http://ocsp.test.invalid/leaf")
        let token = try ca.signer(leaf: leaf).sign(Fixture.transaction())
        let threadsBefore = try Self.threadCount()

        // Far more verifications than any pool of threads for them would hold.
        let count = 64
        let verifications = (0..<count).map { _ in
            Task { () async -> VerificationError.Code? in
                do throws(VerificationError) {
                    _ = try await verifier.verifying { v throws(VerificationError) in try v.verifyAndDecodeTransaction(token) }
                    return nil
                } catch {
                    return error.code
                }
            }
        }
        defer { verifications.forEach { $0.cancel() } }
        let allWaiting = await Self.eventually {
            transport.waiting.load(ordering: .sequentiallyConsistent) == count && responder.connections > 0
        }
        XCTAssertTrue(allWaiting, "\(transport.waiting.load(ordering: .sequentiallyConsistent)) of \(count) checks waiting at once, "
                          + "\(responder.connections) connections to the responder")

        // With every check waiting: the pool still runs work (an offline verification), and the
        // process has not grown a thread per waiting check.
        let offline = try Fixture.verifier()
        let signed = try Fixture.signer.sign(Fixture.transaction())
        let ranMeanwhile = await Task.detached { (try? offline.verifyAndDecodeTransaction(signed))?.transactionId }.value
        XCTAssertEqual(ranMeanwhile, "2000000000000001")
        XCTAssertEqual(transport.waiting.load(ordering: .sequentiallyConsistent), count, "a check ended while the responder was silent")
        let threadsWaiting = try Self.threadCount()
        XCTAssertLessThan(threadsWaiting - threadsBefore, 8, "threads grew from \(threadsBefore) to \(threadsWaiting)")

        // Cancelled callers are refused as an unreachable responder would be, and stop waiting.
        verifications.forEach { $0.cancel() }
        var refusals: [VerificationError.Code?] = []
        for verification in verifications { refusals.append(await verification.value) }
        XCTAssertEqual(Set(refusals), [.revocationCheckUnavailable])
        XCTAssertEqual(transport.waiting.load(ordering: .sequentiallyConsistent), 0)
    }

    /// Polls `condition` until it holds or 30 s pass.
    static func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// The process's threads, as the kernel counts them.
    static func threadCount() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Threads:") }),
              let n = Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)) else {
            throw VerificationError(.invalidConfiguration, "no thread count in /proc/self/status")
        }
        return n
    }
}

/// A loopback TCP listener that accepts connections, reads nothing and never answers.
final class SilentResponder: @unchecked Sendable {
    let port: UInt16
    private let fd: Int32
    private let accepted = Mutex<[Int32]>([])
    private let finished = DispatchSemaphore(value: 0)

    var connections: Int { accepted.withLock { $0.count } }

    init() throws {
        let (fd, port) = try listenOnLoopback(backlog: 128)
        (self.fd, self.port) = (fd, port)
        Thread { [self] in
            defer { finished.signal() }
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { return }
                accepted.withLock { $0.append(client) }
            }
        }.start()
    }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        finished.wait()
        close(fd)
        accepted.withLock { clients in
            clients.forEach { close($0) }
            clients = []
        }
    }
}
