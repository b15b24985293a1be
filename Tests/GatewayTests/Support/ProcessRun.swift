import Foundation

/// A command run to its end: its exit status and what it wrote.
struct ProcessRun {
    let status: Int32
    let stdout: String
    let stderr: String

    static func run(_ executable: String, _ arguments: [String]) throws -> ProcessRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Read both to their end concurrently, so a full pipe never blocks the child.
        let err = LockedData()
        let reader = Thread { err.set(errors.fileHandleForReading.readDataToEndOfFile()) }
        reader.start()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !err.isSet { usleep(1_000) }
        return ProcessRun(status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
                          stderr: String(decoding: err.data, as: UTF8.self))
    }

    /// `curl` against the gateway: the status code is the last line of stdout (`-w`).
    static func curl(_ arguments: [String]) throws -> (exit: Int32, status: Int?, body: String, stderr: String) {
        let run = try run("/usr/bin/curl", ["-sS", "--max-time", "10", "-w", "\n%{http_code}"] + arguments)
        var lines = run.stdout.components(separatedBy: "\n")
        let code = lines.popLast().flatMap { Int($0) }
        return (run.status, code == 0 ? nil : code, lines.joined(separator: "\n"), run.stderr)
    }
}

private final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Data?
    func set(_ data: Data) { lock.lock(); value = data; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value != nil }
    var data: Data { lock.lock(); defer { lock.unlock() }; return value ?? Data() }
}
