import Foundation
import IAPCore

/// The outcome of a batch over every run that worked on it (resumed receipts included), and the
/// ids of the comparisons it stored, so a report can be rendered from exactly these.
public struct BatchSummary: Sendable, Equatable {
    public var bundleId: String
    /// Distinct receipts in the input.
    public var total = 0
    /// Input lines repeating a receipt already listed (compared once).
    public var duplicates = 0
    /// Compared by an earlier run and skipped by this one.
    public var skipped = 0
    /// Compared by this run.
    public var compared = 0
    public var agreed = 0
    public var disagreed = 0
    /// A path failed outright (its error stored in the comparison).
    public var failed = 0
    /// Disagreeing comparisons per difference kind (a comparison with two kinds counts in both).
    public var disagreedByKind: [String: Int] = [:]
    /// Failed comparisons per error code.
    public var failedByCode: [String: Int] = [:]
    /// Every comparison stored for this input, earlier runs' first, then in completion order.
    public var comparisonIds: [String] = []
    public var rateLimitedRetries = 0
    /// Cancelled before every receipt was compared: run again to finish.
    public var interrupted = false
    public var elapsedSeconds = 0.0

    public init(bundleId: String) { self.bundleId = bundleId }

    /// Receipts compared by this run per second.
    public var rate: Double { elapsedSeconds > 0 ? Double(compared) / elapsedSeconds : 0 }

    mutating func add(_ record: BatchRecord, resumed: Bool) {
        if resumed { skipped += 1 } else { compared += 1 }
        comparisonIds.append(record.comparisonId)
        switch record.outcome {
        case .agreed:
            agreed += 1
        case .disagreed(let kinds):
            disagreed += 1
            for kind in kinds { disagreedByKind[kind, default: 0] += 1 }
        case .failed(let codes):
            failed += 1
            for code in Set(codes) { failedByCode[code, default: 0] += 1 }
        }
    }

    var progress: BatchProgress {
        var p = BatchProgress(total: total, skipped: skipped)
        p.compared = compared
        p.agreed = agreed
        p.disagreed = disagreed
        p.failed = failed
        p.rateLimitedRetries = rateLimitedRetries
        p.elapsedSeconds = elapsedSeconds
        return p
    }

    /// The `--json` report.
    public var json: JSONValue {
        .object([
            "bundleId": .string(bundleId),
            "total": .int(Int64(total)),
            "duplicates": .int(Int64(duplicates)),
            "skipped": .int(Int64(skipped)),
            "compared": .int(Int64(compared)),
            "agreed": .int(Int64(agreed)),
            "disagreed": .int(Int64(disagreed)),
            "failed": .int(Int64(failed)),
            "disagreedByKind": .object(disagreedByKind.mapValues { .int(Int64($0)) }),
            "failedByCode": .object(failedByCode.mapValues { .int(Int64($0)) }),
            "rateLimitedRetries": .int(Int64(rateLimitedRetries)),
            "interrupted": .bool(interrupted),
            "elapsedSeconds": .double(elapsedSeconds),
            "receiptsPerSecond": .double(rate),
            "comparisonIds": .array(comparisonIds.map(JSONValue.string)),
        ])
    }

    /// The human summary printed at the end.
    public var text: String {
        var lines = ["\(bundleId): \(total) receipt(s), one comparison each: \(agreed) agreed, \(disagreed) disagreed, \(failed) failed"
            + " (\(compared) compared now, \(skipped) from earlier runs)"]
        for (kind, n) in disagreedByKind.sorted(by: { $0.key < $1.key }) { lines.append("  comparisons with \(kind): \(n)") }
        for (code, n) in failedByCode.sorted(by: { $0.key < $1.key }) { lines.append("  comparisons failed with \(code): \(n)") }
        if rateLimitedRetries > 0 { lines.append("  rate-limited attempts retried: \(rateLimitedRetries)") }
        if duplicates > 0 { lines.append("  duplicate input lines: \(duplicates)") }
        lines.append(String(format: "  %.1f s, %.1f receipts/s", elapsedSeconds, rate))
        if interrupted { lines.append("  interrupted: run the same command again to resume") }
        return lines.joined(separator: "\n")
    }
}
