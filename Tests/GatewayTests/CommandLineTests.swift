import Foundation
import XCTest

/// `iapgw` and `iapgw-dev` as an operator runs them (the built binaries).
final class CommandLineTests: XCTestCase {
    static let commands = ["serve", "reconcile", "notifications", "jws", "receipt", "mappings", "config", "compare", "audit", "backup", "restore",
                           "migrate-storage", "rollout"]
    static let devCommands = ["demo", "sim", "bench", "bench-notifications", "pace"]

    private struct Run { let status: Int32; let stdout: String; let stderr: String }

    private func iapgw(_ arguments: [String], stdin: Data = Data()) throws -> Run {
        try run(GatewayProcess.binary, arguments, stdin: stdin)
    }

    private func run(_ binary: URL, _ arguments: [String], stdin: Data = Data()) throws -> Run {
        let process = Process()
        process.executableURL = binary
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
        for (binary, tool, commands) in [(GatewayProcess.binary, "iapgw", Self.commands),
                                         (GatewayProcess.devBinary, "iapgw-dev", Self.devCommands)] {
            let overview = try run(binary, ["--help"])
            XCTAssertEqual(overview.status, 0)
            for command in commands {
                XCTAssertTrue(overview.stderr.contains("  \(command) "), "the \(tool) overview lists \(command)")
                for flag in ["--help", "-h"] {
                    let help = try run(binary, [command, flag])
                    XCTAssertEqual(help.status, 0, "\(tool) \(command) \(flag): \(help.stderr)")
                    XCTAssertTrue(help.stdout.contains("usage: \(tool) \(command)"), "\(tool) \(command) \(flag): \(help.stdout)")
                }
            }
        }
        let nested = try iapgw(["jws", "verify", "--kind", "transaction", "--help"])
        XCTAssertEqual(nested.status, 0)
        XCTAssertTrue(nested.stdout.contains("usage: iapgw jws verify"))
        // A real usage error stays one.
        XCTAssertEqual(try iapgw(["jws", "verify", "--no-such-flag"]).status, 2)
    }

    /// The benchmarks' load generator sends to loopback only: any other host is a usage error before
    /// a socket is opened, and so is a header that would smuggle another line.
    func testPaceRefusesAnythingButLoopback() throws {
        for url in ["http://10.0.0.1:80/", "http://localhost:8080/", "https://127.0.0.1:8443/", "http://example.com:80/"] {
            let refused = try run(GatewayProcess.devBinary, ["pace", "--url", url, "--rate", "1", "--seconds", "1"])
            XCTAssertEqual(refused.status, 2, url)
            XCTAssertTrue(refused.stderr.contains("loopback"), "\(url): \(refused.stderr)")
        }
        let smuggled = try run(GatewayProcess.devBinary, ["pace", "--url", "http://127.0.0.1:9/", "--rate", "1", "--seconds", "1",
                                                          "--header", "X: a\r\nHost: elsewhere"])
        XCTAssertEqual(smuggled.status, 2, smuggled.stderr)
        let nothing = try run(GatewayProcess.devBinary, ["pace", "--url", "http://127.0.0.1:9/", "--rate", "1", "--seconds", "0.5"])
        XCTAssertEqual(nothing.status, 2, "a run of no request is a usage error, not a figure: \(nothing.stderr)")
    }

    /// `pace --bodies`: a file of fewer bodies than the run has requests is refused before a socket
    /// is opened (some body would be sent twice: a re-claim where a new grant was meant).
    func testPaceRefusesABodiesFileShorterThanItsRun() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pace-bodies-\(UUID().uuidString)")
        try Data("{\"a\":1}\n{\"a\":2}\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let short = try run(GatewayProcess.devBinary, ["pace", "--url", "http://127.0.0.1:9/", "--rate", "3", "--seconds", "1",
                                                       "--bodies", file.path])
        XCTAssertEqual(short.status, 2, short.stderr)
        XCTAssertTrue(short.stderr.contains("the run makes 3 requests but the bodies file has 2 lines"), short.stderr)
        let both = try run(GatewayProcess.devBinary, ["pace", "--url", "http://127.0.0.1:9/", "--rate", "2", "--seconds", "1",
                                                      "--bodies", file.path, "--body", file.path])
        XCTAssertEqual(both.status, 2, both.stderr)
    }

    /// The executables' `main` is async and awaits each command: no command parks a thread on a
    /// semaphore until async work (the server, the simulator, a batch) finishes.
    func testTheCommandLineBridgesNoAsyncWorkThroughABlockedThread() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        var checked = 0
        for target in ["iapgw", "iapgw-dev", "CommandLineSupport"] {
            let folder = sources.appendingPathComponent(target)
            for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where name.hasSuffix(".swift") {
                let text = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
                XCTAssertFalse(text.contains("DispatchSemaphore"), "\(target)/\(name) waits on a semaphore")
                XCTAssertFalse(text.contains("runAsync"), "\(target)/\(name) bridges async work synchronously")
                checked += 1
            }
        }
        XCTAssertGreaterThan(checked, 10)
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

    /// The production executable carries no test machinery: the test PKI "never trusted by a
    /// production policy" and the simulator are in `iapgw-dev` only. Checked on the debug binaries
    /// the tests run (a release build is not made by the test run); both link the same targets.
    func testProductionBinaryLinksNoTestPKIOrSimulatorAndHasNoDevCommands() throws {
        // Swift mangles a module name as its length and name: 7TestPKI, 17AppStoreSimulator, 4Demo.
        let testMachinery = ["7TestPKI", "17AppStoreSimulator", "4Demo"]
        func symbols(_ binary: URL) throws -> String {
            for tool in ["llvm-nm", "nm"] {
                let listing = try run(URL(fileURLWithPath: "/usr/bin/env"), [tool, binary.path])
                if listing.status == 0 { return listing.stdout }
            }
            XCTFail("neither llvm-nm (beside swift) nor nm is on PATH")
            return ""
        }
        let production = try symbols(GatewayProcess.binary)
        XCTAssertTrue(production.contains("7Gateway"), "the listing is of the gateway binary")
        for module in testMachinery {
            let found = production.split(separator: "\n").filter { $0.contains(module) }
            XCTAssertEqual(found.count, 0, "iapgw links \(module): \(found.prefix(3).joined(separator: "\n"))")
        }
        // The check can fail: the development executable does link them.
        let development = try symbols(GatewayProcess.devBinary)
        for module in testMachinery { XCTAssertTrue(development.contains(module), "iapgw-dev links \(module)") }

        for command in Self.devCommands {
            let refused = try iapgw([command])
            XCTAssertEqual(refused.status, 2, "iapgw \(command) is not a command of the production executable")
        }
    }
}
