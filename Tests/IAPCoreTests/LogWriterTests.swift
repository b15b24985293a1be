import Foundation
@testable import IAPCore
import TestSupport
import XCTest

/// The log's output writer: a blocked output never blocks whoever logs, and what is written is
/// whole lines in the order logged, with the dropped ones counted and their place marked.
final class LogWriterTests: XCTestCase {
    func testABlockedOutputDropsAndCountsLinesAndWritesTheRestWholeAndInOrder() throws {
        let pipe = try UnreadPipe()
        let writer = LogWriter(fileDescriptor: pipe.writeEnd, capacityBytes: 16 * 1024)
        let logger = Logger(minimumLevel: .info, writer: writer)
        let total = 5_000
        let started = ContinuousClock.now
        for n in 0..<total { logger.info("line", ["n": String(n), "padding": String(repeating: "x", count: 100)]) }
        // Synchronous writes would block on the full pipe for good; queued ones return at once.
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "logging waited for the blocked output")
        XCTAssertGreaterThan(writer.droppedLines, 0, "5,000 lines do not fit in 4 KB of pipe and 16 KB of queue")

        let (text, flushed) = pipe.readAll { writer.flush(within: .seconds(10)) }
        XCTAssertTrue(flushed, "once read, the output takes everything queued")
        XCTAssertTrue(text.hasSuffix("\n"))
        var numbers: [Int] = []
        var markedDropped = 0
        for line in text.split(separator: "\n") {
            let object = try StrictJSON().parse(Array(line.utf8))
            switch object["event"]?.stringValue {
            case "line": numbers.append(try XCTUnwrap(object["n"]?.stringValue.flatMap { Int($0) }))
            case "log_lines_dropped":
                XCTAssertEqual(object["level"]?.stringValue, "warning")
                markedDropped += try XCTUnwrap(object["count"]?.stringValue.flatMap { Int($0) })
            default: XCTFail("unexpected line \(line.prefix(200))")
            }
        }
        XCTAssertEqual(numbers, numbers.sorted(), "lines are written in the order logged")
        XCTAssertEqual(Set(numbers).count, numbers.count, "each line is written once")
        XCTAssertEqual(numbers.first, 0, "the first lines fit and are kept")
        XCTAssertEqual(markedDropped, writer.droppedLines, "every dropped line is counted where the gap is")
        XCTAssertEqual(numbers.count + markedDropped, total)
    }

    func testFlushGivesUpAtItsDeadlineWhileTheOutputIsBlocked() throws {
        let pipe = try UnreadPipe()
        let writer = LogWriter(fileDescriptor: pipe.writeEnd, capacityBytes: 64 * 1024)
        for n in 0..<200 { writer.write(#"{"n":"\#(n)","padding":"\#(String(repeating: "y", count: 100))"}"#) }
        let started = ContinuousClock.now
        XCTAssertFalse(writer.flush(within: .milliseconds(300)), "20 KB cannot go into an unread 4 KB pipe")
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5))
        let (text, flushed) = pipe.readAll { writer.flush(within: .seconds(10)) }
        XCTAssertTrue(flushed)
        XCTAssertEqual(text.split(separator: "\n").count, 200, "nothing was dropped: it all fit in the queue")
        XCTAssertEqual(writer.droppedLines, 0)
    }

    func testALineLargerThanTheQueueArrivingWhileTheThreadIsIdleIsMarkedAndLaterLinesArrive() throws {
        let pipe = try UnreadPipe()
        let writer = LogWriter(fileDescriptor: pipe.writeEnd, capacityBytes: 256)
        Thread.sleep(forTimeInterval: 0.1)  // the thread is idle, waiting for a line
        writer.write(#"{"event":"oversized","padding":"\#(String(repeating: "z", count: 300))"}"#)
        XCTAssertTrue(writer.flush(within: .seconds(5)), "the drop wakes the thread, which marks the gap")
        for n in 0..<5 { writer.write(#"{"event":"line","n":"\#(n)"}"#) }
        let (text, flushed) = pipe.readAll { writer.flush(within: .seconds(5)) }
        XCTAssertTrue(flushed, "the lines after the oversized one are written: \(text)")
        let lines = try text.split(separator: "\n").map { try StrictJSON().parse(Array($0.utf8)) }
        XCTAssertEqual(lines.map { $0["event"]?.stringValue }, ["log_lines_dropped"] + Array(repeating: "line", count: 5), text)
        XCTAssertEqual(lines.first?["count"]?.stringValue, "1")
        XCTAssertEqual(lines.dropFirst().map { $0["n"]?.stringValue }, ["0", "1", "2", "3", "4"])
        XCTAssertEqual(writer.droppedLines, 1)
    }
}

/// An output that takes `partial` bytes of the first write, fails the second (EIO, a disk error),
/// then takes everything: what a recovering disk does to the log.
private final class FailingMidwayOutput: @unchecked Sendable {
    private let lock = NSLock()
    private var calls = 0
    private var taken: [UInt8] = []
    let partial: Int

    init(partial: Int) { self.partial = partial }

    var text: String { lock.withLock { String(decoding: taken, as: UTF8.self) } }

    func write(_ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        lock.withLock {
            calls += 1
            if calls == 2 {
                errno = EIO
                return -1
            }
            let n = calls == 1 ? min(partial, count) : count
            taken.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: n))
            return n
        }
    }
}

extension LogWriterTests {
    func testAfterAWriteFailedMidLineTheNextLinesStartOnALineOfTheirOwn() throws {
        let output = FailingMidwayOutput(partial: 10)
        let writer = LogWriter(fileDescriptor: -1, capacityBytes: 4096) { _, bytes, count in output.write(bytes, count) }
        let first = #"{"event":"first","padding":"aaaaaaaaaaaaaaaaaaaa"}"#
        writer.write(first)
        XCTAssertTrue(writer.flush(within: .seconds(5)))
        XCTAssertEqual(writer.droppedLines, 1, "the line the output failed on is counted as lost")
        writer.write(#"{"event":"second"}"#)
        writer.write(#"{"event":"third"}"#)
        XCTAssertTrue(writer.flush(within: .seconds(5)))

        let lines = output.text.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.first.map(String.init), String(first.prefix(10)), "the half line stands alone: \(output.text)")
        let events = try lines.dropFirst().dropLast().map { try StrictJSON().parse(Array($0.utf8))["event"]?.stringValue }
        XCTAssertEqual(events, ["second", "third"], output.text)
        XCTAssertEqual(lines.last, "", "the output ends with a whole line")
        XCTAssertEqual(writer.droppedLines, 1)
    }
}
