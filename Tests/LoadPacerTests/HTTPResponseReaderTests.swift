import XCTest

@testable import LoadPacer

final class HTTPResponseReaderTests: XCTestCase {
    private func read(_ text: String, splitAt cuts: [Int], reader: inout HTTPResponseReader) throws -> [HTTPResponseReader.Response] {
        let bytes = Array(text.utf8)
        var done: [HTTPResponseReader.Response] = []
        var start = 0
        for end in cuts + [bytes.count] where end >= start {
            done += try bytes[start..<end].withUnsafeBytes { try reader.consume($0) }
            start = end
        }
        return done
    }

    func testPipelinedResponsesAreFoundInEverySplitOfTheBytes() throws {
        let two = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}"
            + "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        let expected = [HTTPResponseReader.Response(status: 200, closesConnection: false),
                        HTTPResponseReader.Response(status: 404, closesConnection: true)]
        for cut in 0...two.utf8.count {
            var reader = HTTPResponseReader()
            XCTAssertEqual(try read(two, splitAt: [cut], reader: &reader), expected, "split at \(cut)")
            XCTAssertTrue(reader.isIdle)
        }
        var reader = HTTPResponseReader()
        XCTAssertEqual(try read(two, splitAt: Array(1..<two.utf8.count), reader: &reader), expected, "byte by byte")
    }

    func testAResponseIsNotCompleteUntilItsWholeBodyArrived() throws {
        var reader = HTTPResponseReader()
        XCTAssertEqual(try read("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabc", splitAt: [], reader: &reader), [])
        XCTAssertFalse(reader.isIdle)
        XCTAssertEqual(try read("d", splitAt: [], reader: &reader), [.init(status: 200, closesConnection: false)])
    }

    func testTheHeaderSectionAndTheDeclaredBodyAreBounded() {
        var small = HTTPResponseReader(maxHeaderBytes: 64, maxBodyBytes: 100)
        let longHeader = "HTTP/1.1 200 OK\r\nX-Padding: " + String(repeating: "a", count: 100) + "\r\nContent-Length: 0\r\n\r\n"
        XCTAssertThrowsError(try read(longHeader, splitAt: [], reader: &small)) {
            XCTAssertEqual($0 as? HTTPResponseReader.ReadError, .headerTooLarge(limit: 64))
        }
        // An endless header section without CRLF CRLF stops at the limit, not at the end of memory.
        var endless = HTTPResponseReader(maxHeaderBytes: 64)
        XCTAssertThrowsError(try read("HTTP/1.1 200 OK\r\n" + String(repeating: "x", count: 1000), splitAt: [], reader: &endless))
        var bounded = HTTPResponseReader(maxBodyBytes: 100)
        XCTAssertThrowsError(try read("HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n", splitAt: [], reader: &bounded)) {
            XCTAssertEqual($0 as? HTTPResponseReader.ReadError, .bodyTooLarge(declared: 101, limit: 100))
            XCTAssertEqual(($0 as? HTTPResponseReader.ReadError)?.description, "response body of 101 bytes over the limit of 100")
        }
    }

    func testResponsesWhoseEndIsUnknownOrMalformedAreErrors() {
        let bad = [
            "HTTP/1.1 200 OK\r\n\r\n",  // no length on a kept-alive connection
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n",
            "HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 100 Continue\r\n\r\n",
            "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent\rLength: 0\r\n\r\n",  // not Content-Length (a CR is not a dash in any case)
            "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
            "garbage\r\n\r\n",
        ]
        for text in bad {
            var reader = HTTPResponseReader()
            XCTAssertThrowsError(try read(text, splitAt: [], reader: &reader), text.debugDescription)
        }
        var reader = HTTPResponseReader()
        XCTAssertEqual(try read("HTTP/1.1 204 No Content\r\n\r\n", splitAt: [], reader: &reader), [.init(status: 204, closesConnection: false)])
        // Names in any case, values trimmed; HTTP/1.0 closes unless it says keep-alive.
        let mixed = "HTTP/1.1 500 Oops\r\nCONTENT-LENGTH:\t2 \r\nConnection: Keep-Alive, CLOSE\r\n\r\nno"
            + "HTTP/1.0 200 OK\r\nContent-Length: 0\r\nconnection: keep-alive\r\n\r\n" + "HTTP/1.0 201\r\nContent-Length: 0\r\n\r\n"
        XCTAssertEqual(try read(mixed, splitAt: [], reader: &reader), [.init(status: 500, closesConnection: true),
                                                                       .init(status: 200, closesConnection: false),
                                                                       .init(status: 201, closesConnection: true)])
    }
}

final class LoopbackTargetTests: XCTestCase {
    func testOnlyLoopbackAddressesWithAPortAreAccepted() throws {
        let v4 = try LoopbackTarget(url: "http://127.0.0.1:8080/v1/apps/com.example/verify?x=1")
        XCTAssertEqual(v4.family, .ipv4)
        XCTAssertEqual(v4.port, 8080)
        XCTAssertEqual(v4.path, "/v1/apps/com.example/verify?x=1")
        XCTAssertEqual(v4.host, "127.0.0.1:8080")
        let v6 = try LoopbackTarget(url: "http://[::1]:9/")
        XCTAssertEqual(v6.family, .ipv6)
        XCTAssertEqual(try LoopbackTarget(url: "http://127.0.0.1:1").path, "/")
        for url in ["https://127.0.0.1:8443/", "http://localhost:80/", "http://127.0.0.2:80/", "http://127.0.0.1.example.com:80/",
                    "http://10.0.0.1:80/", "http://example.com:80/", "http://[::2]:80/", "http://127.0.0.1/", "http://127.0.0.1:0/",
                    "http://127.0.0.1:99999/", "http://127.0.0.1@example.com:80/", "ftp://127.0.0.1:21/"]
        {
            XCTAssertThrowsError(try LoopbackTarget(url: url), url)
        }
    }

    func testTheRequestIsExactAndAHeaderCannotSmuggleAnother() throws {
        let target = try LoopbackTarget(url: "http://127.0.0.1:8080/verify")
        let bytes = try target.request(method: "POST", headers: ["Authorization: Bearer k"], body: Array("{}".utf8))
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self),
                       "POST /verify HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer k\r\nContent-Length: 2\r\n\r\n{}")
        for header in ["X: a\r\nY: b", "X: a\nGET / HTTP/1.1", "no colon", ": empty name", "Content-Length: 5", "Connection: close"] {
            XCTAssertThrowsError(try target.request(method: "POST", headers: [header], body: []), header.debugDescription)
        }
        XCTAssertThrowsError(try target.request(method: "get", headers: [], body: []))
    }
}
