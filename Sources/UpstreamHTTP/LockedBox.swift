import Foundation

/// A value behind an NSLock. Used instead of Synchronization.Mutex because on Linux Mutex sits on raw
/// futexes that ThreadSanitizer cannot see: with Mutex, every hand-over of a transfer to the curl thread
/// showed up as a (false) data race, which would hide real ones.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
