/// Which adapter produced a fact. Stable strings: they are stored with every canonical record.
public struct AdapterID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static let verifyReceipt = AdapterID(rawValue: "verifyReceipt")
    public static let serverAPI = AdapterID(rawValue: "serverAPI")
}
