import CommandLineSupport
import Foundation
import IAPCore
import IAPMapping

/// `iapgw mappings check [DIR]` validates every mapping file (exit 1 if any is bad);
/// `iapgw mappings show SOURCE[/VERSION] [--dir DIR]` prints one file's rules.
struct MappingsCommand: Subcommand {
    let name = "mappings"
    let summary = "check and show the mapping files"
    let usage = """
        usage: iapgw mappings check [DIR]                      (default DIR: Mappings/)
               iapgw mappings show SOURCE[/VERSION] [--dir DIR]
        """

    func run(_ args: inout CommandLineArguments) throws -> Int32 {
        switch args.positional() {
        case "check":
            let dir = args.positional() ?? "Mappings"
            try args.finish()
            return check(URL(fileURLWithPath: dir))
        case "show":
            guard let what = args.positional() else { throw UsageError(message: "show needs SOURCE[/VERSION]") }
            let dir = try args.value("--dir") ?? "Mappings"
            try args.finish()
            return try show(what, URL(fileURLWithPath: dir))
        case let other?:
            throw UsageError(message: "unknown action \(other)")
        case nil:
            throw UsageError(message: "missing action")
        }
    }

    private func check(_ dir: URL) -> Int32 {
        let outcomes: [MappingSet.CheckOutcome]
        do {
            outcomes = try MappingSet.check(directory: dir)
        } catch {
            printError("\(error)")
            return 1
        }
        guard !outcomes.isEmpty else {
            printError("error \(dir.path): no mapping files (<source>/<version>.json)")
            return 1
        }
        var failed = false
        for outcome in outcomes {
            switch outcome.result {
            case .success(let file): print("ok \(file.id) (\(file.ruleCount) rules)")
            case .failure(let error):
                failed = true
                print("error \(error)")
            }
        }
        return failed ? 1 : 0
    }

    private func show(_ what: String, _ dir: URL) throws -> Int32 {
        let set = try MappingSet.load(directory: dir)
        let parts = what.split(separator: "/", maxSplits: 1).map(String.init)
        let file = parts.count == 2 ? set.version(source: parts[0], parts[1]) : set.latest(source: parts[0])
        guard let file else {
            printError("no mapping \(what) under \(dir.path) (have: \(set.files.map(\.id).joined(separator: ", ")))")
            return 1
        }
        print("\(file.id)  \(file.file)")
        if let description = file.description { print("  \(description)") }
        for kind in file.kindNames {
            print("\n[\(kind)] -> \(file.target(ofKind: kind)?.rawValue ?? "?")")
            for line in file.ruleLines(kind: kind) { print("  \(line)") }
            for (field, reason) in file.knownDifferences(kind: kind).sorted(by: { $0.key < $1.key }) {
                print("  known difference \(field): \(reason)")
            }
        }
        return 0
    }

    /// Through stderr's one writer, so the message lands after the lines logged before it, never inside one.
    private func printError(_ text: String) {
        LogWriter.standardError.write(text)
    }
}
