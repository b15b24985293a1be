import Foundation
import Synchronization

/// Where a batch stands: counts so far over the receipts this run has to compare.
public struct BatchProgress: Sendable, Equatable {
    /// Receipts in the input (skipped ones included).
    public var total: Int
    /// Already compared by an earlier run (resumed).
    public var skipped: Int
    /// Finished in this run.
    public var compared: Int
    public var agreed: Int
    public var disagreed: Int
    /// A path failed outright (its error stored in the comparison).
    public var failed: Int
    /// Attempts put back because Apple answered 429.
    public var rateLimitedRetries: Int
    public var elapsedSeconds: Double

    /// Nothing counted yet.
    static let zero = BatchProgress(total: 0, skipped: 0, compared: 0, agreed: 0, disagreed: 0, failed: 0,
                                    rateLimitedRetries: 0, elapsedSeconds: 0)

    public var done: Int { skipped + compared }
    /// Receipts per second compared in this run.
    public var rate: Double { elapsedSeconds > 0 ? Double(compared) / elapsedSeconds : 0 }
    public var etaSeconds: Double? {
        guard rate > 0 else { return nil }
        return Double(total - done) / rate
    }
}

/// Shows a batch's progress: a bar redrawn in place on a terminal, plain lines at most every
/// `interval` when the output is a file or a pipe (CI logs must not fill with carriage returns).
public final class BatchProgressPrinter: Sendable {
    private let isTerminal: Bool
    private let interval: Double
    private let write: @Sendable (String) -> Void
    private let lastLine = Mutex<Double?>(nil)

    public init(isTerminal: Bool, interval: Double = 2, write: @escaping @Sendable (String) -> Void) {
        self.isTerminal = isTerminal
        self.interval = interval
        self.write = write
    }

    /// Standard output, as a terminal only when it is one.
    public static func standardOutput() -> BatchProgressPrinter {
        BatchProgressPrinter(isTerminal: isatty(1) == 1) { text in FileHandle.standardOutput.write(Data(text.utf8)) }
    }

    /// Call on every change; `final` forces the last state out (and ends the bar's line).
    public func update(_ p: BatchProgress, final: Bool = false) {
        if isTerminal {
            write("\r\u{1B}[2K" + Self.bar(p) + (final ? "\n" : ""))
            return
        }
        let due = lastLine.withLock { last -> Bool in
            guard final || last.map({ p.elapsedSeconds - $0 >= interval }) ?? true else { return false }
            last = p.elapsedSeconds
            return true
        }
        if due { write(Self.line(p) + "\n") }
    }

    static func bar(_ p: BatchProgress, width: Int = 30) -> String {
        let fraction = p.total > 0 ? Double(p.done) / Double(p.total) : 1
        let filled = min(width, Int(fraction * Double(width)))
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
            + Self.line(p)
    }

    /// `123/200 (61%) agreed 110 disagreed 9 failed 4 skipped 0 · 35.2/s · ETA 0:02`
    static func line(_ p: BatchProgress) -> String {
        let percent = p.total > 0 ? p.done * 100 / p.total : 100
        var text = "\(p.done)/\(p.total) (\(percent)%) agreed \(p.agreed) disagreed \(p.disagreed) failed \(p.failed)"
            + " skipped \(p.skipped)"
        if p.rateLimitedRetries > 0 { text += " rate-limited \(p.rateLimitedRetries)" }
        text += String(format: " · %.1f/s", p.rate)
        text += " · ETA " + (p.etaSeconds.map(clock) ?? "--:--")
        return text
    }

    static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}
