// Placeholder until this subcommand is built in this session's work on issue 2.
struct BenchCommand: Subcommand {
    let name = "bench"
    let summary = "measure verification speed against OpenSSL"
    let usage = "usage: iapgw bench ..."
    func run(_ args: inout CommandLineArguments) throws -> Int32 { throw UsageError(message: "not built yet") }
}
