// Placeholder until this subcommand is built in this session's work on issue 2.
struct JWSCommand: Subcommand {
    let name = "jws"
    let summary = "verify JWS from stdin"
    let usage = "usage: iapgw jws ..."
    func run(_ args: inout CommandLineArguments) throws -> Int32 { throw UsageError(message: "not built yet") }
}
