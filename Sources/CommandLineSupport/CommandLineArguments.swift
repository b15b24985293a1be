/// A subcommand of `iapgw` or `iapgw-dev`: its name, one line for the overview, its usage text, and its body.
public protocol Subcommand {
    var name: String { get }
    var summary: String { get }
    var usage: String { get }
    /// Returns the process exit code: 0 ok, 1 refused or invalid input. Async: the executables'
    /// `main` awaits it, so no command bridges async work with a blocked thread.
    func run(_ args: inout CommandLineArguments) async throws -> Int32
}

public struct UsageError: Error {
    public let message: String
    public init(message: String) { self.message = message }
}

/// A small, strict reader of command-line arguments: `--name value`, `--name=value`, `--flag`
/// and positionals. Every option must be consumed by the command, so a typo is a usage error
/// (exit 2) instead of a silently ignored check.
public struct CommandLineArguments {
    private var items: [String]

    public init(_ items: [String]) { self.items = items }

    /// All values of a repeatable option (`--root A --root B`).
    public mutating func values(_ name: String) throws(UsageError) -> [String] {
        var found: [String] = []
        var i = 0
        while i < items.count {
            let item = items[i]
            if item == name {
                guard i + 1 < items.count, !items[i + 1].hasPrefix("--") else {
                    throw UsageError(message: "\(name) needs a value")
                }
                found.append(items[i + 1])
                items.removeSubrange(i...(i + 1))
            } else if item.hasPrefix(name + "=") {
                found.append(String(item.dropFirst(name.count + 1)))
                items.remove(at: i)
            } else if item == "--" {
                break
            } else {
                i += 1
            }
        }
        return found
    }

    /// A single-valued option; given twice is a usage error.
    public mutating func value(_ name: String) throws(UsageError) -> String? {
        let all = try values(name)
        guard all.count <= 1 else { throw UsageError(message: "\(name) given more than once") }
        return all.first
    }

    public mutating func flag(_ name: String) -> Bool {
        guard let i = items.firstIndex(of: name) else { return false }
        items.remove(at: i)
        return true
    }

    /// The next positional argument, if any.
    public mutating func positional() -> String? {
        guard let i = items.firstIndex(where: { !$0.hasPrefix("--") }) else { return nil }
        return items.remove(at: i)
    }

    /// Call after reading every option: anything left over is a usage error.
    public func finish() throws(UsageError) {
        let rest = items.filter { $0 != "--" }
        guard rest.isEmpty else { throw UsageError(message: "unexpected argument(s): \(rest.joined(separator: " "))") }
    }
}
