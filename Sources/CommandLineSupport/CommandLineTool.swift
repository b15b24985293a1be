import Foundation
import IAPCore

/// The entry point both executables share: picks the subcommand named by the first argument, answers
/// `--help`, and maps the outcome to the exit code (0 ok, 1 refused or invalid input, 2 usage error).
/// `tool` is the executable's name as messages and usage texts give it.
/// `main` calls `prepareStandardDescriptors()` first.
public func runCommandLine(tool: String, subcommands: [any Subcommand]) async -> Never {
    let argv = Array(CommandLine.arguments.dropFirst())
    guard let name = argv.first, let command = subcommands.first(where: { $0.name == name }) else {
        var text = "usage: \(tool) <command> [options]\n\ncommands:"
        for c in subcommands { text += "\n  \(c.name.padding(toLength: 20, withPad: " ", startingAt: 0)) \(c.summary)" }
        exitAfterLog(argv.first.map { ["-h", "--help", "help"].contains($0) } == true ? 0 : 2, message: text)
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

/// The first statement of an executable's `main`, before its first `await`: that starts Swift's
/// concurrency runtime, whose epoll descriptor would otherwise take a closed fd 2 (seen so). A log
/// reader that exits must not kill the gateway, and a closed standard descriptor must not be
/// reused by a file the process opens.
/// - SIGPIPE is ignored, so a write to a pipe nobody reads fails with EPIPE (`LogWriter` counts the
///   lines as dropped; the HTTP server sends with MSG_NOSIGNAL anyway). Children are unaffected:
///   `ChildProcess` spawns them with every signal's default disposition (POSIX_SPAWN_SETSIGDEF).
/// - A descriptor 0-2 closed at exec (`2>&-`) is opened on /dev/null: otherwise the next open()
///   (the database, say) would get it, and log lines or output would be written into that file.
public func prepareStandardDescriptors() {
    signal(SIGPIPE, SIG_IGN)
    for descriptor in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where fcntl(descriptor, F_GETFD) == -1 {
        // open() takes the lowest free number, which is this one when the lower ones are open.
        let null = open("/dev/null", O_RDWR)
        if null >= 0, null != descriptor {
            dup2(null, descriptor)
            close(null)
        }
    }
}
