/// A refusal by the simulator's own API (unknown app, unknown transaction, bad admin input).
/// Not part of the gateway's error contract: the simulator is a test double.
public struct SimulatorError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "simulator: \(message)" }
}
