import Foundation
import XCTest

/// `iapgw` as an operator runs it (the built binary).
final class CommandLineTests: XCTestCase {
    static let commands = ["serve", "demo", "sim", "reconcile", "notifications", "jws", "receipt", "mappings", "config",
                           "bench", "bench-notifications", "compare"]

    private struct Run { let status: Int32; let stdout: String; let stderr: String }

    private func iapgw(_ arguments: [String], stdin: Data = Data()) throws -> Run {
        let process = Process()
        process.executableURL = GatewayProcess.binary
        process.arguments = arguments
        let input = Pipe(), output = Pipe(), errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        input.fileHandleForWriting.write(stdin)
        try input.fileHandleForWriting.close()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
                   stderr: String(decoding: err, as: UTF8.self))
    }

    func testEveryCommandsHelpExitsZeroWithItsUsage() throws {
        let overview = try iapgw(["--help"])
        XCTAssertEqual(overview.status, 0)
        for command in Self.commands {
            XCTAssertTrue(overview.stderr.contains("  \(command) "), "the overview lists \(command)")
            for flag in ["--help", "-h"] {
                let run = try iapgw([command, flag])
                XCTAssertEqual(run.status, 0, "\(command) \(flag): \(run.stderr)")
                XCTAssertTrue(run.stdout.contains("usage: iapgw \(command)"), "\(command) \(flag): \(run.stdout)")
            }
        }
        let nested = try iapgw(["jws", "verify", "--kind", "transaction", "--help"])
        XCTAssertEqual(nested.status, 0)
        XCTAssertTrue(nested.stdout.contains("usage: iapgw jws verify"))
        // A real usage error stays one.
        XCTAssertEqual(try iapgw(["jws", "verify", "--no-such-flag"]).status, 2)
    }

    func testConfigCheckPrintsTheConnectionLimits() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("apps"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(("<gateway><limits><maxConnections type=\"integer\">64</maxConnections>"
            + "<maxConnectionsPerClient type=\"integer\">8</maxConnectionsPerClient></limits></gateway>").utf8)
            .write(to: directory.appendingPathComponent("gateway.xml"))
        let run = try iapgw(["config", "check", directory.path])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertTrue(run.stdout.contains("connections 64 (8 per client)"), run.stdout)
    }

    func testJWSVerifyWithNothingOnStdinSaysSoAndExitsNonZero() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/testdata/apple-real")
        let arguments = ["jws", "verify", "--kind", "transaction", "--root", root.appendingPathComponent("AppleRootCA-G3.cer").path,
                         "--bundle-id", "com.goodheartapp", "--environment", "Sandbox"]
        for stdin in ["", "\n  \n"] {
            let run = try iapgw(arguments, stdin: Data(stdin.utf8))
            XCTAssertEqual(run.status, 1, "stdin \(stdin.debugDescription)")
            XCTAssertEqual(run.stdout, "")
            XCTAssertTrue(run.stderr.contains("no JWS on stdin"), run.stderr)
        }
        // Apple's real transaction still verifies and exits 0.
        let jws = try Data(contentsOf: root.appendingPathComponent("sandbox-consumable-transaction.jws"))
        let real = try iapgw(arguments, stdin: jws)
        XCTAssertEqual(real.status, 0, real.stderr)
        XCTAssertTrue(real.stdout.hasPrefix("{"), real.stdout)
        XCTAssertTrue(real.stdout.contains("\"valid\":true"), real.stdout)
    }
}
