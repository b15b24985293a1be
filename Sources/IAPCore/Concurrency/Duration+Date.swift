import Foundation

extension Duration {
    /// This duration in seconds, fractions kept (for Foundation's time intervals).
    public var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }

    /// The moment this long from now, as `NSCondition.wait(until:)` takes it.
    public var fromNow: Date { Date(timeIntervalSinceNow: timeInterval) }
}
