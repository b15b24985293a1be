/// Where a ledger lives, read from the gateway's `storageURL`: the one reading of that string, for
/// the ledger and for what keeps files beside it (the receipt seal key).
public enum LedgerStorage: Equatable, Sendable {
    /// `sqlite:PATH`, or a plain path.
    case sqlite(path: String)
    /// `postgres://…` or `postgresql://…`, as libpq reads it.
    case postgres(url: String)

    public init(_ storageURL: String) {
        if storageURL.hasPrefix("postgres://") || storageURL.hasPrefix("postgresql://") {
            self = .postgres(url: storageURL)
        } else {
            self = .sqlite(path: storageURL.hasPrefix("sqlite:") ? String(storageURL.dropFirst("sqlite:".count)) : storageURL)
        }
    }
}
