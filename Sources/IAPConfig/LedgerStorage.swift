/// Where a ledger lives, read from the gateway's `storageURL`: the one reading of that string, for
/// the gateway's configuration, the ledger and what keeps files beside it (the receipt seal key).
public enum LedgerStorage: Equatable, Sendable {
    /// `sqlite:PATH`, or a plain path.
    case sqlite(path: String)
    /// `postgres://…` or `postgresql://…`, as libpq reads it.
    case postgres(url: String)

    /// Any text: `GatewayConfig` has already refused what is neither `sqlite:` nor `postgres(ql)://`.
    public init(_ storageURL: String) {
        if storageURL.hasPrefix("postgres://") || storageURL.hasPrefix("postgresql://") {
            self = .postgres(url: storageURL)
        } else {
            self = .sqlite(path: storageURL.hasPrefix("sqlite:") ? String(storageURL.dropFirst("sqlite:".count)) : storageURL)
        }
    }

    /// The `storageURL` this was read from (`sqlite:PATH` for a plain path).
    public var url: String {
        switch self {
        case .sqlite(let path): "sqlite:" + path
        case .postgres(let url): url
        }
    }
}
