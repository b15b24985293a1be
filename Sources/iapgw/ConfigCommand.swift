// Placeholder until this subcommand is built in this session's work on issue 2.
struct ConfigCommand: Subcommand {
    let name = "config"
    let summary = "check the per-app and gateway configuration"
    let usage = "usage: iapgw config ..."
    func run(_ args: inout CommandLineArguments) throws -> Int32 { throw UsageError(message: "not built yet") }
}
