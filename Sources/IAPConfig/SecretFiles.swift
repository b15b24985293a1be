import Foundation
import IAPCore

/// The one reader of secret files (a `.p8` key, a shared secret, a webhook secret): `SecretReference`
/// asks it for a file's content and gets what was last read, never waiting for the disk.
///
/// Secrets were read on every use, on whatever thread used them (Swift's cooperative pool for
/// `POST /verify`): a hung mount stalled that thread, and with two of them every request. Here the
/// gateway's files are read at start (`load`), then every `refreshInterval` by a thread of its own,
/// so a rotated file is used within that delay. A read that fails (the file is gone, unreadable, or
/// empty or only whitespace) keeps the last good value: it is logged (`secret_refresh_failed`,
/// naming the setting, never the path or the value) and counted (`refreshFailures`, `staleFiles`).
/// A changed content is taken only when a second read `settleDelay` later agrees: a rotation caught
/// half-written is read again at the next pass. A file asked for before it was loaded (a tool, a
/// test) is read once by the caller, then refreshed like the others.
public final class SecretFiles: @unchecked Sendable {
    /// The process's reader, which every `SecretReference` naming a file goes through.
    public static let shared = SecretFiles(refreshInterval: .seconds(10))
    /// How long after a read that found a changed content the second read is made: long enough for
    /// a writer's next chunk, short enough not to hold up the pass.
    static let settleDelay: Duration = .milliseconds(75)

    public let refreshInterval: Duration
    /// One read of one file (tests give a reader that hangs, as a hung mount does).
    private let read: @Sendable (URL) throws(VerificationError) -> Data

    private struct Entry {
        /// What the file is in the configuration ("com.example.app: sharedSecret"): for the log.
        var setting: String
        /// Where its refreshes are logged (the gateway's logger; none for a file not `load`ed).
        var logger: Logger
        var lastGood: Data?
        /// The last read's failure, when it failed (then `lastGood`, if any, is served).
        var failure: VerificationError?
    }

    /// Guards everything below; the refreshing thread waits on it, and so does `refreshNow`.
    private let condition = NSCondition()
    private var files: [String: Entry] = [:]
    private var threadStarted = false
    private var passRequested = false
    private var passing = false
    private var passesDone = 0
    private var failures = 0

    public init(refreshInterval: Duration,
                read: @escaping @Sendable (URL) throws(VerificationError) -> Data = SecretFiles.readFile) {
        self.refreshInterval = refreshInterval
        self.read = read
    }

    /// Reads the `named` files now (on the caller's thread: the gateway's start) and keeps them refreshed;
    /// failures are logged to `logger` (as are later refreshes'). A file that cannot be read yet is
    /// not an error here: it is an error when used, until a refresh reads it.
    public func load(_ named: [(setting: String, url: URL)], logger: Logger) {
        let read = named.map { file in (file.setting, file.url.path, Result { () throws(VerificationError) in try self.read(file.url) }) }
        condition.lock()
        defer { condition.unlock() }
        for (setting, path, result) in read {
            files[path] = Entry(setting: setting, logger: logger)
            record(path, result, isRefresh: false)
        }
        startThreadIfNeeded()
    }

    /// The content of the file at `url` as last read, or why it could not be read yet. With
    /// `keepingLastGood` false, the last good value is not served while the last read failed: for a
    /// secret whose removal revokes it (a `previous` one).
    public func data(_ url: URL, keepingLastGood: Bool = true) throws(VerificationError) -> Data {
        let path = url.path
        condition.lock()
        if let entry = files[path] {
            condition.unlock()
            if let failure = entry.failure, !keepingLastGood { throw failure }
            if let good = entry.lastGood { return good }
            throw entry.failure ?? VerificationError(.invalidConfiguration, "secret file:\(path) cannot be read or is empty")
        }
        condition.unlock()
        let result = Result { () throws(VerificationError) in try read(url) }
        condition.lock()
        if files[path] == nil {
            files[path] = Entry(setting: "", logger: .disabled)
            record(path, result, isRefresh: false)
        }
        startThreadIfNeeded()
        condition.unlock()
        return try result.get()
    }

    /// Reads of a loaded file that failed since start (its last good value was served meanwhile).
    public var refreshFailures: Int {
        condition.lock()
        defer { condition.unlock() }
        return failures
    }

    /// What the reads of a file came to, for readiness (never touching the disk).
    public enum Standing: Sendable, Equatable {
        /// The last read succeeded.
        case fresh
        /// The last read failed; the last good value serves (a `previous` secret is not served).
        case stale
        /// Never read successfully since it was loaded (or never loaded): nothing to serve.
        case unread
    }

    /// How the file at `url` stands as last read, without reading it.
    public func standing(_ url: URL) -> Standing {
        condition.lock()
        defer { condition.unlock() }
        guard let entry = files[url.path], entry.lastGood != nil else { return .unread }
        return entry.failure == nil ? .fresh : .stale
    }

    /// Files whose last read failed.
    public var staleFiles: Int {
        condition.lock()
        defer { condition.unlock() }
        return files.values.filter { $0.failure != nil }.count
    }

    /// Asks the thread for a pass now and waits for it, at most `limit`; false if it did not end in
    /// time (a read hangs). For tests and operators' tools: the gateway itself only waits for the timer.
    @discardableResult
    public func refreshNow(within limit: Duration) -> Bool {
        let end = limit.fromNow
        condition.lock()
        defer { condition.unlock() }
        startThreadIfNeeded()
        // A pass already under way may have read a file before it changed: wait for the one after.
        let target = passesDone + (passing ? 2 : 1)
        passRequested = true
        condition.broadcast()
        while passesDone < target {
            guard condition.wait(until: end) else { return false }
        }
        return true
    }

    private func startThreadIfNeeded() {
        guard !threadStarted else { return }
        threadStarted = true
        let thread = Thread { [self] in refreshLoop() }
        thread.name = "iapgw.secrets"
        thread.start()
    }

    /// The refreshing thread: a pass every `refreshInterval`, or at once when asked.
    private func refreshLoop() {
        condition.lock()
        while true {
            let next = max(refreshInterval, .milliseconds(10)).fromNow
            while !passRequested, condition.wait(until: next) {}
            passRequested = false
            passing = true
            let paths = Array(files.keys)
            condition.unlock()
            let outcomes = settled(paths.map { path in (path, readOnce(path)) })
            condition.lock()
            for (path, result) in outcomes { record(path, result, isRefresh: true) }
            passing = false
            passesDone += 1
            condition.broadcast()
        }
    }

    /// `outcomes` less the changed contents that a second read `settleDelay` later does not confirm
    /// (the lock not held): those files are being written, and the next pass reads them again.
    private func settled(_ outcomes: [(String, Result<Data, VerificationError>)]) -> [(String, Result<Data, VerificationError>)] {
        condition.lock()
        let lastGood = outcomes.map { path, _ in files[path]?.lastGood }
        condition.unlock()
        let changed = outcomes.indices.filter { index in
            guard case .success(let data) = outcomes[index].1, let good = lastGood[index] else { return false }
            return data != good
        }
        guard !changed.isEmpty else { return outcomes }
        Thread.sleep(forTimeInterval: Self.settleDelay.timeInterval)
        let unsettled = Set(changed.filter { index in (try? readOnce(outcomes[index].0).get()) != (try? outcomes[index].1.get()) })
        return outcomes.indices.filter { !unsettled.contains($0) }.map { outcomes[$0] }
    }

    private func readOnce(_ path: String) -> Result<Data, VerificationError> {
        Result { () throws(VerificationError) in try read(URL(fileURLWithPath: path)) }
    }

    /// Keeps a read's outcome (the lock held). A failed refresh keeps the last good value and is
    /// logged when the file turns from good to failing, and again when it recovers.
    private func record(_ path: String, _ result: Result<Data, VerificationError>, isRefresh: Bool) {
        guard var entry = files[path] else { return }
        let (setting, logger) = (entry.setting, entry.logger)
        let wasFailing = entry.failure != nil
        switch result {
        case .success(let data):
            entry.lastGood = data
            entry.failure = nil
            if wasFailing { logger.info("secret_refreshed", ["setting": setting]) }
        case .failure(let error):
            entry.failure = error
            if isRefresh { failures += 1 }
            if isRefresh, !wasFailing {
                logger.error("secret_refresh_failed", ["setting": setting, "code": error.code.rawValue,
                                                       "keeping": entry.lastGood == nil ? "nothing" : "last good value"])
            }
        }
        files[path] = entry
    }

    /// One read of a secret file, bounded in size; content that is only whitespace (a file emptied
    /// or just begun by a rotation) is not a secret, and is a failed read.
    public static func readFile(_ url: URL) throws(VerificationError) -> Data {
        let source = SecretReference.Source.file(url)
        let limit = SecretReference.maxSecretFileBytes
        let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
        if let size = attributes?[.size] as? NSNumber, size.intValue > limit {
            throw VerificationError(.inputTooLarge, "secret \(source) is larger than \(limit) bytes")
        }
        let whitespace = Set(" \t\n\r\u{0B}\u{0C}".utf8)
        guard let data = try? Data(contentsOf: url), !data.allSatisfy(whitespace.contains) else {
            throw VerificationError(.invalidConfiguration, "secret \(source) cannot be read or is empty")
        }
        guard data.count <= limit else {
            throw VerificationError(.inputTooLarge, "secret \(source) is larger than \(limit) bytes")
        }
        return data
    }
}

extension AppPolicy {
    /// Every secret this policy names (a `previous` one as "<setting>.previous"), with where it comes from.
    public var secretSources: [(setting: String, source: SecretReference.Source)] {
        let apiKeySecret: SecretReference? = if case .secret(let reference) = apiKey { reference } else { nil }
        let named: [(String, SecretReference?)] = [
            ("sharedSecret", sharedSecret), ("serverAPI.privateKey", serverAPI?.privateKey), ("apiKey", apiKeySecret),
            ("webhook.secret", webhook?.secret), ("offerSigning.privateKey", offerSigning?.privateKey),
        ]
        return named.flatMap { name, reference -> [(setting: String, source: SecretReference.Source)] in
            guard let reference else { return [] }
            return [(reference.source, name), (reference.previous, "\(name).previous")].compactMap { source, setting in
                source.map { (setting: setting, source: $0) }
            }
        }
    }

    /// The files this policy's secrets are read from, each with the setting that names it (for `SecretFiles.load`).
    public var secretFiles: [(setting: String, url: URL)] {
        secretSources.compactMap { setting, source in
            guard case .file(let url) = source else { return nil }
            return (setting: "\(bundleId): \(setting)", url: url)
        }
    }
}
