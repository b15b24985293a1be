import Foundation
import IAPCore

/// The outcome of a batch over every run that worked on it (resumed receipts included), and the
/// ids of the comparisons it stored, so a report can be rendered from exactly these.
@dynamicMemberLookup
public struct BatchSummary: Sendable, Equatable {
    public var bundleId: String
    /// The counts a progress line shows (`total`, `compared`, `agreed`, ...), read and written
    /// through the summary as its own.
    public private(set) var progress = BatchProgress.zero
    /// Input lines repeating a receipt already listed (compared once).
    public var duplicates = 0
    /// Disagreeing comparisons per difference kind (a comparison with two kinds counts in both).
    public var disagreedByKind: [String: Int] = [:]
    /// Failed comparisons per error code.
    public var failedByCode: [String: Int] = [:]
    /// Every comparison stored for this input, earlier runs' first, then in completion order.
    public var comparisonIds: [String] = []
    /// Cancelled before every receipt was compared: run again to finish.
    public var interrupted = false

    public init(bundleId: String) { self.bundleId = bundleId }

    public subscript<T>(dynamicMember count: KeyPath<BatchProgress, T>) -> T { progress[keyPath: count] }

    public subscript<T>(dynamicMember count: WritableKeyPath<BatchProgress, T>) -> T {
        get { progress[keyPath: count] }
        set { progress[keyPath: count] = newValue }
    }

    mutating func add(_ record: BatchRecord, resumed: Bool) {
        if resumed { progress.skipped += 1 } else { progress.compared += 1 }
        comparisonIds.append(record.comparisonId)
        switch record.outcome {
        case .agreed:
            progress.agreed += 1
        case .disagreed(let kinds):
            progress.disagreed += 1
            for kind in kinds { disagreedByKind[kind, default: 0] += 1 }
        case .failed(let codes):
            progress.failed += 1
            for code in Set(codes) { failedByCode[code, default: 0] += 1 }
        }
    }

    /// The `--json` report.
    public var json: JSONValue {
        let p = progress
        return .object([
            "bundleId": .string(bundleId),
            "total": .int(Int64(p.total)),
            "duplicates": .int(Int64(duplicates)),
            "skipped": .int(Int64(p.skipped)),
            "compared": .int(Int64(p.compared)),
            "agreed": .int(Int64(p.agreed)),
            "disagreed": .int(Int64(p.disagreed)),
            "failed": .int(Int64(p.failed)),
            "disagreedByKind": .object(disagreedByKind.mapValues { .int(Int64($0)) }),
            "failedByCode": .object(failedByCode.mapValues { .int(Int64($0)) }),
            "rateLimitedRetries": .int(Int64(p.rateLimitedRetries)),
            "interrupted": .bool(interrupted),
            "elapsedSeconds": .double(p.elapsedSeconds),
            "receiptsPerSecond": .double(p.rate),
            "comparisonIds": .array(comparisonIds.map(JSONValue.string)),
        ])
    }

    /// The human summary printed at the end.
    public var text: String {
        let p = progress
        var lines = ["\(bundleId): \(p.total) receipt(s), one comparison each: \(p.agreed) agreed, \(p.disagreed) disagreed, \(p.failed) failed"
            + " (\(p.compared) compared now, \(p.skipped) from earlier runs)"]
        for (kind, n) in disagreedByKind.sorted(by: { $0.key < $1.key }) { lines.append("  comparisons with \(kind): \(n)") }
        for (code, n) in failedByCode.sorted(by: { $0.key < $1.key }) { lines.append("  comparisons failed with \(code): \(n)") }
        if p.rateLimitedRetries > 0 { lines.append("  rate-limited attempts retried: \(p.rateLimitedRetries)") }
        if duplicates > 0 { lines.append("  duplicate input lines: \(duplicates)") }
        lines.append(String(format: "  %.1f s, %.1f receipts/s", p.elapsedSeconds, p.rate))
        if interrupted { lines.append("  interrupted: run the same command again to resume") }
        return lines.joined(separator: "\n")
    }
}
