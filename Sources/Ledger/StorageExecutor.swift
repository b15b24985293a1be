import IAPCore

/// The ledger's storage calls run on a `BlockingExecutor` whose refusals are `STORAGE_UNAVAILABLE`.
public typealias StorageExecutor = BlockingExecutor

extension BlockingExecutor {
    public convenience init(limits: Limits) {
        self.init(purpose: "storage", unavailable: .storageUnavailable, limits: limits)
    }
}
