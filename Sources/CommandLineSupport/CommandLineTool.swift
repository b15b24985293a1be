import Foundation
import IAPCore

/// The entry point both executables share: picks the subcommand named by the first argument, answers
/// `--help`, and maps the outcome to the exit code (0 ok, 1 refused or invalid input, 2 usage error).
/// `tool` is the executable's name as messages and usage texts give it.
public func runCommandLine(tool: String, subcommands: [any Subcommand]) async -> Never {
    let argv = Array(CommandLine.arguments.dropFirst())
    guard let name = argv.first, let command = subcommands.first(where: { $0.name == name }) else {
        var text = "usage: \(tool) <command> [options]\n\ncommands:\n"
        for c in subcommands { text += "  \(c.name.padding(toLength: 20, withPad: " ", startingAt: 0)) \(c.summary)\n" }
        FileHandle.standardError.write(Data(text.utf8))
        exit(argv.first.map { ["-h", "--help", "help"].contains($0) } == true ? 0 : 2)
    }
    // Asking for help is not a usage error: the command's usage on stdout, exit 0.
    if argv.dropFirst().prefix(while: { $0 != "--" }).contains(where: { $0 == "--help" || $0 == "-h" }) {
        FileHandle.standardOutput.write(Data("\(tool) \(name): \(command.summary)\n\(command.usage)\n".utf8))
        exit(0)
    }
    do {
        var args = CommandLineArguments(Array(argv.dropFirst()))
        exitAfterLog(try await command.run(&args))
    } catch let error as UsageError {
        exitAfterLog(2, message: "\(tool) \(name): \(error.message)\n\(command.usage)")
    } catch {
        exitAfterLog(1, message: "\(tool) \(name): \(error)")
    }
}

/// Exits once the log lines queued for stderr (and `message` after them) are written, waiting at
/// most 2 s for them: a blocked stderr loses its last lines rather than keeping the process alive.
private func exitAfterLog(_ code: Int32, message: String? = nil) -> Never {
    if let message { LogWriter.standardError.write(message) }
    LogWriter.standardError.flush(within: .seconds(2))
    exit(code)
}
