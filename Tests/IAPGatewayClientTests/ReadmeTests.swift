import Foundation
import XCTest

/// The README's Swift that a reader copies is the source that is compiled and tested: each block
/// after `<!-- verbatim: PATH -->` must be that file's text, byte for byte.
final class ReadmeTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    func testEveryVerbatimBlockIsItsFile() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        var lines = readme.components(separatedBy: "\n")[...]
        var included: [String] = []
        while let line = lines.popFirst() {
            guard line.hasPrefix("<!-- verbatim: "), line.hasSuffix(" -->") else { continue }
            let path = String(line.dropFirst("<!-- verbatim: ".count).dropLast(" -->".count))
            XCTAssertEqual(lines.popFirst(), "```swift", "\(path): a swift block must follow its marker")
            var block: [String] = []
            while let next = lines.popFirst(), next != "```" { block.append(next) }
            let source = try String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
            XCTAssertEqual(block.joined(separator: "\n") + "\n", source, "README's copy of \(path) differs from the file")
            included.append(path)
        }
        XCTAssertEqual(included, ["Sources/IAPGatewayClient/AppAccountToken.swift",
                                  "Tests/IAPGatewayClientTests/BackendExample.swift"])
    }
}
