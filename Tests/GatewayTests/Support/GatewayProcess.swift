import Foundation
import XCTest

/// `iapgw serve` as a separate process (the built binary), so a test can SIGKILL it like a
/// crashed host and start it again on the same database.
final class GatewayProcess: @unchecked Sendable {
    let process = Process()
    /// The child's stderr goes to a file, read when asked: a pipe with a `readabilityHandler`
    /// (a libdispatch source on the pipe's descriptor) crashed the test process now and then in
    /// `_dispatch_event_loop_drain` when the child was SIGKILLed and the pipe torn down.
    private let stderrFile: URL
    private let stderrHandle: FileHandle

    /// The debug binary next to the test bundle (`swift build` builds it with the tests).
    static var binary: URL { built("iapgw") }

    /// The development executable (demo, sim, bench), built beside it.
    static var devBinary: URL { built("iapgw-dev") }

    private static func built(_ name: String) -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(".build/debug/\(name)")
    }

    static var mappings: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Mappings")
    }

    /// `environment` is added to this process's own (a shared receipt seal key, say).
    init(config: URL, environment: [String: String] = [:]) throws {
        process.executableURL = Self.binary
        process.arguments = ["serve", "--config", config.path, "--mappings", Self.mappings.path]
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, added in added }
        }
        stderrFile = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-serve-\(UUID().uuidString).log")
        guard FileManager.default.createFile(atPath: stderrFile.path, contents: nil) else {
            throw GatewayProcessError(message: "cannot create \(stderrFile.path)")
        }
        stderrHandle = try FileHandle(forWritingTo: stderrFile)
        process.standardError = stderrHandle
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    deinit {
        try? stderrHandle.close()
        try? FileManager.default.removeItem(at: stderrFile)
    }

    var log: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

    /// The port from the "listening" log line, once the server is up.
    func port(within seconds: Double = 10) async throws -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            for line in log.split(separator: "\n") where line.contains("\"listening\"") {
                if let range = line.range(of: #""port":"?(\d+)"#, options: .regularExpression) {
                    let digits = line[range].filter(\.isNumber)
                    if let port = Int(digits) { return port }
                }
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw GatewayProcessError(message: "iapgw serve did not start: \(log.suffix(2000))")
    }

    func kill9() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

struct GatewayProcessError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
