import Foundation

/// Structured JSON-lines logging. One line per event: `{"ts":…,"level":…,"event":…, fields…}`.
///
/// Callers pass only what is safe to log: ids, codes, counts, never receipts, secrets or keys.
/// Every line written while a request is handled carries its `requestId` (a task-local set by the
/// gateway), so the lines of one request are found together even from components that were built
/// once at start (adapters, upstream clients) and know nothing of requests.
public struct Logger: Sendable {
    public enum Level: String, Sendable, Comparable {
        case debug, info, warning, error
        private var rank: Int {
            switch self {  // not a dictionary literal: this runs on every log call
            case .debug: 0
            case .info: 1
            case .warning: 2
            case .error: 3
            }
        }
        public static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }
    }

    /// The request being handled by the current task (and the tasks it starts).
    @TaskLocal public static var requestId: String?

    public let minimumLevel: Level
    /// The writer the lines go to when they go to an output (standard error), for its dropped-line count.
    public let writer: LogWriter?
    private let sink: @Sendable (String) -> Void
    private let context: [String: String]

    public init(minimumLevel: Level = .info, context: [String: String] = [:], sink: @escaping @Sendable (String) -> Void) {
        self.init(minimumLevel: minimumLevel, context: context, writer: nil, sink: sink)
    }

    /// Logs to `writer`, one line each, queued: a blocked output never blocks the caller.
    public init(minimumLevel: Level = .info, writer: LogWriter) {
        self.init(minimumLevel: minimumLevel, context: [:], writer: writer, sink: writer.write)
    }

    private init(minimumLevel: Level, context: [String: String], writer: LogWriter?, sink: @escaping @Sendable (String) -> Void) {
        self.minimumLevel = minimumLevel
        self.context = context
        self.writer = writer
        self.sink = sink
    }

    /// Logs to standard error (`LogWriter.standardError`), one line each.
    public static func standardError(minimumLevel: Level = .info) -> Logger {
        Logger(minimumLevel: minimumLevel, writer: .standardError)
    }

    /// Logs nothing (tests, library defaults).
    public static let disabled = Logger(minimumLevel: .error) { _ in }

    /// A logger whose every line also carries these fields (e.g. the request id).
    public func with(_ fields: [String: String]) -> Logger {
        Logger(minimumLevel: minimumLevel, context: context.merging(fields) { _, new in new }, writer: writer, sink: sink)
    }

    public func log(_ level: Level, _ event: String, _ fields: [String: String] = [:]) {
        guard level >= minimumLevel else { return }
        var object: [String: JSONValue] = [
            "ts": .string(Self.timestamp()), "level": .string(level.rawValue), "event": .string(event),
        ]
        if let requestId = Self.requestId { object["requestId"] = .string(requestId) }
        // The call's fields win over the logger's context (no merged dictionary built per line).
        for (k, v) in context where fields[k] == nil { object[k] = .string(v) }
        for (k, v) in fields { object[k] = .string(v) }
        sink(JSONValue.object(object).jsonText)
    }

    public func debug(_ event: String, _ fields: [String: String] = [:]) { log(.debug, event, fields) }
    public func info(_ event: String, _ fields: [String: String] = [:]) { log(.info, event, fields) }
    public func warning(_ event: String, _ fields: [String: String] = [:]) { log(.warning, event, fields) }
    public func error(_ event: String, _ fields: [String: String] = [:]) { log(.error, event, fields) }

    /// RFC 3339 UTC with milliseconds, formatted by hand: Foundation's date formatters go through
    /// ICU and cost more than the request being logged.
    static func timestamp(_ date: Date = Date()) -> String {
        let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(ms / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(ms % 1000), 3))Z"
    }
}
