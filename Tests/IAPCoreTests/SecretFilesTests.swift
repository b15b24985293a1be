import Foundation
import IAPConfig
import IAPCore
import TestSupport
import XCTest

/// Secret files are read by their owner's thread, not by whoever uses them: a rotation is picked
/// up by the next refresh, and a refresh that fails keeps the last good value and says so.
final class SecretFilesTests: XCTestCase {
    private func temporaryFile(_ text: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("secret-files-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("shared-secret")
        try Data(text.utf8).write(to: file)
        return file
    }

    private func text(_ files: SecretFiles, _ file: URL) throws -> String {
        String(decoding: try files.data(file), as: UTF8.self)
    }

    func testARotationIsPickedUpByTheRefreshAndAFailedRefreshKeepsTheLastGoodValue() throws {
        let file = try temporaryFile("first-secret-5b1e")
        let logs = LogCapture()
        let files = SecretFiles(refreshInterval: .seconds(3600))
        files.load([(setting: "com.example.app: sharedSecret", url: file)], logger: logs.logger)
        XCTAssertEqual(try text(files, file), "first-secret-5b1e")

        try Data("second-secret-9c4d".utf8).write(to: file)
        XCTAssertEqual(try text(files, file), "first-secret-5b1e", "a use does not read the file")
        XCTAssertTrue(files.refreshNow(within: .seconds(5)))
        XCTAssertEqual(try text(files, file), "second-secret-9c4d", "the refresh picks up the rotation")

        try FileManager.default.removeItem(at: file)
        XCTAssertTrue(files.refreshNow(within: .seconds(5)))
        XCTAssertEqual(try text(files, file), "second-secret-9c4d", "the last good value is kept")
        XCTAssertEqual(files.refreshFailures, 1)
        XCTAssertEqual(files.staleFiles, 1)
        let failed = try XCTUnwrap(logs.captured.first { $0.contains("secret_refresh_failed") }, "\(logs.captured)")
        XCTAssertTrue(failed.contains("com.example.app: sharedSecret"), failed)
        XCTAssertTrue(failed.contains(#""level":"error""#), failed)
        for leak in [file.path, "shared-secret\"", "second-secret", "first-secret"] {
            XCTAssertFalse(failed.contains(leak), "\(leak) in \(failed)")
        }

        try Data("third-secret-07aa".utf8).write(to: file)
        XCTAssertTrue(files.refreshNow(within: .seconds(5)))
        XCTAssertEqual(try text(files, file), "third-secret-07aa")
        XCTAssertEqual(files.staleFiles, 0)
        XCTAssertEqual(files.refreshFailures, 1)
        XCTAssertTrue(logs.captured.contains { $0.contains("secret_refreshed") })
        XCTAssertFalse(logs.captured.joined().contains("-secret-"), "no secret value in any line")
    }

    func testTheTimerPicksUpARotationWithinItsInterval() throws {
        let file = try temporaryFile("before-rotation")
        let files = SecretFiles(refreshInterval: .milliseconds(100))
        files.load([(setting: "com.example.app: serverAPI.privateKey", url: file)], logger: .disabled)
        XCTAssertEqual(try text(files, file), "before-rotation")
        try Data("after-rotation".utf8).write(to: file)
        let deadline = ContinuousClock.now + .seconds(5)
        while try text(files, file) != "after-rotation", ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.02) }
        XCTAssertEqual(try text(files, file), "after-rotation")
    }

    func testAFileNotReadableAtStartIsAnErrorWhenUsedUntilARefreshReadsIt() throws {
        let file = try temporaryFile("later")
        try FileManager.default.removeItem(at: file)
        let files = SecretFiles(refreshInterval: .seconds(3600))
        files.load([(setting: "com.example.app: webhook.secret", url: file)], logger: .disabled)
        XCTAssertThrowsError(try files.data(file)) { error in
            XCTAssertEqual((error as? VerificationError)?.code, .invalidConfiguration)
        }
        try Data("later".utf8).write(to: file)
        XCTAssertTrue(files.refreshNow(within: .seconds(5)))
        XCTAssertEqual(try text(files, file), "later")
    }

    func testAReadThatHangsStallsNoUseOnlyTheRefreshingThread() throws {
        let file = try temporaryFile("good-value")
        let hang = HangSwitch()
        let files = SecretFiles(refreshInterval: .seconds(3600)) { url throws(VerificationError) in
            hang.waitWhileOn()
            return try SecretFiles.readFile(url)
        }
        files.load([(setting: "com.example.app: sharedSecret", url: file)], logger: .disabled)
        hang.turn(on: true)
        XCTAssertFalse(files.refreshNow(within: .milliseconds(200)), "the refresh hangs in its read")
        let started = ContinuousClock.now
        XCTAssertEqual(try text(files, file), "good-value", "a use answers from what was read")
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1))
        hang.turn(on: false)
        XCTAssertTrue(files.refreshNow(within: .seconds(5)))
    }

    func testAFileOnlyWhitespaceIsAFailedRefreshThatKeepsTheLastGoodValue() throws {
        let file = try temporaryFile("good-secret-3a9f")
        let logs = LogCapture()
        let files = SecretFiles(refreshInterval: .seconds(3600))
        files.load([(setting: "com.example.app: sharedSecret", url: file)], logger: logs.logger)
        try Data(" \n".utf8).write(to: file)  // a rotation that emptied the file and has not written it yet
        XCTAssertTrue(files.refreshNow(within: .seconds(5)))
        XCTAssertEqual(try text(files, file), "good-secret-3a9f", "whitespace is not a secret")
        XCTAssertEqual(files.refreshFailures, 1)
        XCTAssertEqual(files.staleFiles, 1)
        XCTAssertTrue(logs.captured.contains { $0.contains("secret_refresh_failed") && $0.contains("com.example.app: sharedSecret") },
                      "\(logs.captured)")
    }

    func testAChangedContentIsTakenOnlyWhenASecondReadAgrees() throws {
        let file = try temporaryFile("unused")
        let reads = ScriptedReads(["first-value"])
        let files = SecretFiles(refreshInterval: .seconds(3600)) { _ throws(VerificationError) in reads.next() }
        files.load([(setting: "com.example.app: serverAPI.privateKey", url: file)], logger: .disabled)
        XCTAssertEqual(try text(files, file), "first-value")

        reads.set(["-----BEGIN PRIV", "-----BEGIN PRIVATE KEY-----\nfull"])  // caught mid-write, then complete
        XCTAssertTrue(files.refreshNow(within: .seconds(5)))
        XCTAssertEqual(try text(files, file), "first-value", "a half-written file is not taken")
        XCTAssertEqual(files.refreshFailures, 0, "a file being written is not a failure")

        reads.set(["-----BEGIN PRIVATE KEY-----\nfull"])
        XCTAssertTrue(files.refreshNow(within: .seconds(5)))
        XCTAssertEqual(try text(files, file), "-----BEGIN PRIVATE KEY-----\nfull", "two reads agree: the rotation is taken")
    }

    func testAPreviousSecretIsNeverServedStaleSoDeletingItsFileRevokesIt() throws {
        let current = try temporaryFile("current-secret-51c0")
        let previous = try temporaryFile("previous-secret-e7d2")
        SecretFiles.shared.load([(setting: "com.example.app: sharedSecret", url: current),
                                 (setting: "com.example.app: sharedSecret.previous", url: previous)], logger: .disabled)
        let reference = SecretReference(.file(current), previous: .file(previous))
        XCTAssertEqual(try reference.resolvePrevious(environment: [:]), "previous-secret-e7d2")

        try FileManager.default.removeItem(at: previous)
        try FileManager.default.removeItem(at: current)
        XCTAssertTrue(SecretFiles.shared.refreshNow(within: .seconds(10)))
        XCTAssertThrowsError(try reference.resolvePrevious(environment: [:]), "a deleted previous secret is revoked") { error in
            XCTAssertEqual((error as? VerificationError)?.code, .invalidConfiguration)
        }
        XCTAssertEqual(try reference.resolve(environment: [:]), "current-secret-51c0", "the current one keeps its last good value")
    }

    /// A reader that gives the scripted contents in turn, the last one from then on.
    private final class ScriptedReads: @unchecked Sendable {
        private let lock = NSLock()
        private var contents: [String]
        init(_ contents: [String]) { self.contents = contents }
        func set(_ contents: [String]) { lock.withLock { self.contents = contents } }
        func next() -> Data {
            lock.withLock { Data((contents.count > 1 ? contents.removeFirst() : contents[0]).utf8) }
        }
    }

    /// A read that waits while on, as one on a hung mount does, until turned off.
    private final class HangSwitch: @unchecked Sendable {
        private let condition = NSCondition()
        private var on = false
        func turn(on: Bool) {
            condition.lock()
            self.on = on
            condition.broadcast()
            condition.unlock()
        }
        func waitWhileOn() {
            condition.lock()
            while on { condition.wait() }
            condition.unlock()
        }
    }
}
