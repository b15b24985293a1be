import Foundation

/// Structured JSON-lines logging. One line per event: `{"ts":…,"level":…,"event":…, fields…}`.
///
/// Callers pass only what is safe to log: ids, codes, counts, never receipts, secrets or keys.
/// `requestId` rides along in `fields` so every line of one request can be found together.
public struct Logger: Sendable {
    public enum Level: String, Sendable, Comparable {
        case debug, info, warning, error
        private var rank: Int { [.debug: 0, .info: 1, .warning: 2, .error: 3][self]! }
        public static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }
    }

    public let minimumLevel: Level
    private let sink: @Sendable (String) -> Void
    private let context: [String: String]

    public init(minimumLevel: Level = .info, context: [String: String] = [:], sink: @escaping @Sendable (String) -> Void) {
        self.minimumLevel = minimumLevel
        self.context = context
        self.sink = sink
    }

    /// Logs to standard error, one line each.
    public static func standardError(minimumLevel: Level = .info) -> Logger {
        Logger(minimumLevel: minimumLevel) { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }

    /// Logs nothing (tests, library defaults).
    public static let disabled = Logger(minimumLevel: .error) { _ in }

    /// A logger whose every line also carries these fields (e.g. the request id).
    public func with(_ fields: [String: String]) -> Logger {
        Logger(minimumLevel: minimumLevel, context: context.merging(fields) { _, new in new }, sink: sink)
    }

    public func log(_ level: Level, _ event: String, _ fields: [String: String] = [:]) {
        guard level >= minimumLevel else { return }
        var object: [String: JSONValue] = [
            "ts": .string(Self.timestamp()), "level": .string(level.rawValue), "event": .string(event),
        ]
        for (k, v) in context.merging(fields, uniquingKeysWith: { _, new in new }) { object[k] = .string(v) }
        sink(JSONValue.object(object).jsonText)
    }

    public func debug(_ event: String, _ fields: [String: String] = [:]) { log(.debug, event, fields) }
    public func info(_ event: String, _ fields: [String: String] = [:]) { log(.info, event, fields) }
    public func warning(_ event: String, _ fields: [String: String] = [:]) { log(.warning, event, fields) }
    public func error(_ event: String, _ fields: [String: String] = [:]) { log(.error, event, fields) }

    private static func timestamp() -> String {
        let ms = Int64(Date().timeIntervalSince1970 * 1000)
        return ISO8601DateFormatter.string(from: Date(timeIntervalSince1970: Double(ms) / 1000),
                                           timeZone: TimeZone(identifier: "UTC")!,
                                           formatOptions: [.withInternetDateTime, .withFractionalSeconds])
    }
}
