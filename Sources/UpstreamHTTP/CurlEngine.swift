import CCurl
import Foundation
import Synchronization

/// curl_global_init must run once, before any other curl call; a Swift global is initialised exactly once.
private let curlGlobalInit: CURLcode = iapgw_curl_global_init_default()

/// One dedicated thread driving a curl multi handle. The multi handle owns the connection cache, so
/// connections are kept alive and reused across requests (and easy handles), and it enforces the
/// per-host connection limit by queueing excess transfers. Blocking waits happen here, never on the
/// Swift cooperative pool.
final class CurlEngine: @unchecked Sendable {
    private struct Inbox {
        var submissions: [CurlTransfer] = []
        var stopping = false
        /// Set (under the lock) before the multi handle is freed, so late wake-ups never touch it.
        var closed = false
    }

    private let multi: UnsafeMutableRawPointer
    private let inbox = Mutex(Inbox())

    // Engine-thread state.
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var idleHandles: [UnsafeMutableRawPointer] = []
    private let maxIdleHandles: Int

    /// Transfers handed to curl so far; lets tests prove a refused request never reached the network layer.
    let transfersStarted = Atomic<Int>(0)

    init(maxConnectionsPerHost: Int) throws(UpstreamError) {
        guard curlGlobalInit == CURLE_OK else { throw .transport("curl_global_init failed") }
        guard let multi = curl_multi_init() else { throw .transport("curl_multi_init failed") }
        self.multi = multi
        maxIdleHandles = max(4, maxConnectionsPerHost * 2)
        _ = iapgw_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxConnectionsPerHost)
        // Cache room for a few upstream hosts (Apple production, sandbox, a simulator) at full width.
        _ = iapgw_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxConnectionsPerHost * 4)
        let thread = Thread { [self] in self.runLoop() }
        thread.name = "UpstreamHTTP.curl"
        thread.start()
    }

    func submit(_ transfer: CurlTransfer) {
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            inbox.submissions.append(transfer)
            curl_multi_wakeup(multi)
            return true
        }
        if !accepted { resume(transfer, with: .failure(.transport("HTTP client shut down"))) }
    }

    /// Wakes the loop so it notices a cancellation flag promptly.
    func wake() {
        inbox.withLock { inbox in
            if !inbox.closed { curl_multi_wakeup(multi) }
        }
    }

    func shutdown() {
        inbox.withLock { inbox in
            inbox.stopping = true
            if !inbox.closed { curl_multi_wakeup(multi) }
        }
    }

    private func runLoop() {
        while true {
            let (submissions, stopping) = inbox.withLock { inbox in
                defer { inbox.submissions = [] }
                return (inbox.submissions, inbox.stopping)
            }
            for transfer in submissions { start(transfer) }
            if stopping { break }
            for (easy, transfer) in active where transfer.cancelRequested.load(ordering: .relaxed) {
                finish(easy, with: .failure(.cancelled))
            }
            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            collectCompleted()
            var ready: Int32 = 0
            // The wait ends on socket activity, a curl timer, a wake-up, or after a second at most.
            _ = curl_multi_poll(multi, nil, 0, 1000, &ready)
        }
        for easy in Array(active.keys) { finish(easy, with: .failure(.transport("HTTP client shut down"))) }
        let late = inbox.withLock { inbox in
            inbox.closed = true
            defer { inbox.submissions = [] }
            return inbox.submissions
        }
        for transfer in late { resume(transfer, with: .failure(.transport("HTTP client shut down"))) }
        for easy in idleHandles { curl_easy_cleanup(easy) }
        idleHandles = []
        curl_multi_cleanup(multi)
    }

    private func start(_ transfer: CurlTransfer) {
        if transfer.cancelRequested.load(ordering: .relaxed) {
            resume(transfer, with: .failure(.cancelled))
            return
        }
        guard let easy = idleHandles.popLast() ?? curl_easy_init() else {
            resume(transfer, with: .failure(.transport("curl_easy_init failed")))
            return
        }
        curl_easy_reset(easy)
        let setup = transfer.configure(easy)
        guard setup == CURLE_OK else {
            recycle(easy)
            resume(transfer, with: .failure(.transport(String(cString: curl_easy_strerror(setup)))))
            return
        }
        let added = curl_multi_add_handle(multi, easy)
        guard added == CURLM_OK else {
            recycle(easy)
            resume(transfer, with: .failure(.transport(String(cString: curl_multi_strerror(added)))))
            return
        }
        active[easy] = transfer
        transfersStarted.add(1, ordering: .relaxed)
    }

    private func collectCompleted() {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = iapgw_curl_msg_result(message)
            guard let transfer = active[easy] else { continue }
            finish(easy, with: transfer.outcome(code: code, easy: easy))
        }
    }

    private func finish(_ easy: UnsafeMutableRawPointer, with result: Result<UpstreamResponse, UpstreamError>) {
        guard let transfer = active.removeValue(forKey: easy) else { return }
        curl_multi_remove_handle(multi, easy)
        recycle(easy)
        resume(transfer, with: result)
    }

    private func recycle(_ easy: UnsafeMutableRawPointer) {
        if idleHandles.count < maxIdleHandles { idleHandles.append(easy) } else { curl_easy_cleanup(easy) }
    }

    private func resume(_ transfer: CurlTransfer, with result: Result<UpstreamResponse, UpstreamError>) {
        let continuation = transfer.continuation
        transfer.continuation = nil
        continuation?.resume(returning: result)
    }
}
