import Foundation
import IAPCore
import TestSupport
import XCTest

/// `iapgw serve` (the built binary) with a standard error that is no use: a pipe whose reader has
/// exited, or a descriptor closed at exec. It keeps serving, and exits cleanly when told to.
final class ServeStandardErrorTests: XCTestCase {
    /// The separate gateway's config on a fixed loopback port: its "listening" line cannot be read here.
    private func serveArguments(_ gw: GatewayE2E) throws -> (arguments: [String], environment: [String: String], base: String) {
        let (config, storage) = try separateGatewayConfig(from: gw.harness.directory, harnessDatabase: gw.sqlitePath, test: self)
        let port = try Self.unusedLoopbackPort()
        let file = config.appendingPathComponent("gateway.xml")
        let xml = try String(contentsOf: file, encoding: .utf8)
        let fixed = xml.replacingOccurrences(of: #"<listenPort type="integer">0</listenPort>"#,
                                             with: #"<listenPort type="integer">\#(port)</listenPort>"#)
        XCTAssertNotEqual(fixed, xml, "gateway.xml names its port")
        try fixed.write(to: file, atomically: true, encoding: .utf8)
        let environment = ProcessInfo.processInfo.environment.merging(storage.processEnvironment) { _, added in added }
        return (["serve", "--config", config.path, "--mappings", GatewayProcess.mappings.path], environment,
                "http://127.0.0.1:\(port)")
    }

    private func untilHealthy(_ gw: GatewayE2E, _ base: String, _ process: Process) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, process.isRunning {
            if let answer = try? await gw.send("GET", "\(base)/healthz"), answer.status == 200 { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        let ended = process.isRunning ? "" : ", \(process.terminationReason == .uncaughtSignal ? "signal" : "exit") \(process.terminationStatus)"
        throw GatewayProcessError(message: "serve did not answer /healthz: running \(process.isRunning)\(ended)")
    }

    private func terminate(_ process: Process) async throws {
        kill(process.processIdentifier, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(30)
        while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        XCTAssertFalse(process.isRunning, "serve did not stop within 30 s of SIGTERM")
        XCTAssertEqual(process.terminationReason, .exit, "killed by signal \(process.terminationStatus)")
        XCTAssertEqual(process.terminationStatus, 0)
    }

    func testServeWithStderrAPipeWhoseReaderExitedKeepsAnsweringAndExitsZeroOnSIGTERM() async throws {
        let gw = try await GatewayE2E.start(self)
        let (arguments, environment, base) = try serveArguments(gw)
        let process = Process()
        process.executableURL = GatewayProcess.binary
        process.arguments = arguments
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        let stderr = Pipe()
        process.standardError = stderr
        try stderr.fileHandleForReading.close()  // the log shipper is gone: every write to stderr is EPIPE
        try process.run()
        addTeardownBlock { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        try await untilHealthy(gw, base, process)
        for _ in 0..<5 {  // refusals log a line each
            let refused = try await gw.send("POST", "\(base)/v1/apps/\(gw.bundleId)/verify", body: Array("{}".utf8),
                                            apiKey: .some("not-the-key"))
            XCTAssertEqual(refused.status, 401, refused.text)
        }
        let health = try await gw.send("GET", "\(base)/healthz")
        XCTAssertEqual(health.status, 200, health.text)
        try await terminate(process)
    }

    func testServeStartedWithStderrClosedHasItOnDevNullNotOnAFileItOpened() async throws {
        let gw = try await GatewayE2E.start(self)
        let (arguments, environment, base) = try serveArguments(gw)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", #"exec "$0" "$@" 2>&-"#, GatewayProcess.binary.path] + arguments
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        addTeardownBlock { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        try await untilHealthy(gw, base, process)
        let refused = try await gw.send("POST", "\(base)/v1/apps/\(gw.bundleId)/verify", body: Array("{}".utf8),
                                        apiKey: .some("not-the-key"))
        XCTAssertEqual(refused.status, 401, refused.text)
        // The shell exec'd the gateway: same pid. Its fd 2 is where its log lines went.
        let target = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(process.processIdentifier)/fd/2")
        XCTAssertEqual(target, "/dev/null", "fd 2 was reused by a file the gateway opened")
        try await terminate(process)
    }

    private static func unusedLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
