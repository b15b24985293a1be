// Placeholder until this subcommand is built in this session's work on issue 2.
struct ReceiptCommand: Subcommand {
    let name = "receipt"
    let summary = "inspect and verify legacy receipts"
    let usage = "usage: iapgw receipt ..."
    func run(_ args: inout CommandLineArguments) throws -> Int32 { throw UsageError(message: "not built yet") }
}
