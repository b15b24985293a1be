import Foundation
import XCTest

/// Package.swift declares what each target imports, no more and no less: a reader takes the
/// target graph from the manifest, so an undeclared import (reached only through another target's
/// dependency) or a stale one (a dependency nothing uses) makes the graph lie.
final class PackageGraphTests: XCTestCase {
    /// Modules of the toolchain and the system, never declared as targets.
    static let system: Set<String> = ["Foundation", "FoundationNetworking", "FoundationXML", "FoundationEssentials",
                                      "Glibc", "Musl", "Darwin", "Dispatch", "Synchronization", "XCTest", "Testing",
                                      "PackageDescription"]

    func testEveryTargetDeclaresExactlyTheTargetsItImports() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let declared = try Self.declaredDependencies(manifest)
        XCTAssertGreaterThan(declared.count, 10, "the manifest's targets were not found")

        for (target, dependencies) in declared.sorted(by: { $0.key < $1.key }) {
            let folder = ["Sources", "Tests"].map { root.appendingPathComponent($0).appendingPathComponent(target) }
                .first { FileManager.default.fileExists(atPath: $0.path) }
            let imported = try Self.imports(under: try XCTUnwrap(folder, "no folder for \(target)"))
            XCTAssertEqual(dependencies, imported, "\(target): declared \(dependencies.sorted()), imports \(imported.sorted())")
        }
    }

    /// Configuration is a target of its own on top of the model: IAPCore depends on nothing, and the
    /// model never needs a configuration type (the compiler holds that once the boundary exists).
    func testConfigurationIsItsOwnTargetOverTheModel() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let declared = try Self.declaredDependencies(String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8))
        XCTAssertEqual(declared["IAPCore"], [])
        XCTAssertEqual(declared["IAPConfig"], ["IAPCore"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: root.appendingPathComponent("Sources/IAPCore/Config").path))
    }

    /// `.target(name: "X", dependencies: [...])`, `.executableTarget` and `.testTarget` alike.
    static func declaredDependencies(_ manifest: String) throws -> [String: Set<String>] {
        let pattern = try NSRegularExpression(pattern: #"\.(?:target|executableTarget|testTarget)\(name: "([\w-]+)",\s*dependencies: \[([^\]]*)\]"#)
        let text = manifest as NSString
        var declared: [String: Set<String>] = [:]
        for match in pattern.matches(in: manifest, range: NSRange(location: 0, length: text.length)) {
            let names = text.substring(with: match.range(at: 2)).split(separator: ",")
                .map { $0.trimmingCharacters(in: .whitespacesAndNewlines).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
                .filter { !$0.isEmpty }
            declared[text.substring(with: match.range(at: 1))] = Set(names)
        }
        return declared
    }

    /// The non-system modules the Swift files below `folder` import.
    static func imports(under folder: URL) throws -> Set<String> {
        var modules: Set<String> = []
        let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift" else { continue }
            for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") {
                var words = line.split(separator: " ")
                if words.first == "@testable" { words.removeFirst() }
                guard words.count >= 2, words[0] == "import" else { continue }
                modules.insert(String(words[1]))
            }
        }
        return modules.subtracting(system)
    }
}
