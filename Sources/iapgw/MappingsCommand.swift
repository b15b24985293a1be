// Placeholder until this subcommand is built in this session's work on issue 2.
struct MappingsCommand: Subcommand {
    let name = "mappings"
    let summary = "check the mapping files"
    let usage = "usage: iapgw mappings ..."
    func run(_ args: inout CommandLineArguments) throws -> Int32 { throw UsageError(message: "not built yet") }
}
