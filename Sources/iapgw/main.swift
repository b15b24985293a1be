// iapgw: the IAPGateway command line. Each subcommand lives in its own file; this table is the
// only place that names them all. Exit codes: 0 ok, 1 refused/invalid input, 2 usage error.
import Foundation

let subcommands: [any Subcommand] = [
    ServeCommand(), DemoCommand(), SimCommand(), ReconcileCommand(), NotificationsCommand(),
    JWSCommand(), ReceiptCommand(), MappingsCommand(), ConfigCommand(), BenchCommand(), BenchNotificationsCommand(), CompareCommand(),
]

@MainActor func printUsage() {
    var text = "usage: iapgw <command> [options]\n\ncommands:\n"
    for c in subcommands { text += "  \(c.name.padding(toLength: 20, withPad: " ", startingAt: 0)) \(c.summary)\n" }
    FileHandle.standardError.write(Data(text.utf8))
}

var argv = Array(CommandLine.arguments.dropFirst())
guard let name = argv.first, let command = subcommands.first(where: { $0.name == name }) else {
    printUsage()
    exit(argv.first.map { ["-h", "--help", "help"].contains($0) } == true ? 0 : 2)
}
// Asking for help is not a usage error: the command's usage on stdout, exit 0.
if argv.dropFirst().prefix(while: { $0 != "--" }).contains(where: { $0 == "--help" || $0 == "-h" }) {
    FileHandle.standardOutput.write(Data("iapgw \(name): \(command.summary)\n\(command.usage)\n".utf8))
    exit(0)
}
do {
    var args = CommandLineArguments(Array(argv.dropFirst()))
    exit(try command.run(&args))
} catch let error as UsageError {
    FileHandle.standardError.write(Data("iapgw \(name): \(error.message)\n\(command.usage)\n".utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("iapgw \(name): \(error)\n".utf8))
    exit(1)
}
