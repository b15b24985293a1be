import AppleTrust
import Foundation
import IAPCore
import Ledger

/// One stored receipt of a batch: a line of the input file `{"receipt": "<base64>", "account"?: "..."}`.
public struct BatchReceipt: Sendable, Hashable {
    public var receipt: String
    public var account: String?
    /// 1-based line number in the input, for error messages (never the receipt itself).
    public var line: Int

    public init(receipt: String, account: String? = nil, line: Int = 0) {
        self.receipt = receipt
        self.account = account
        self.line = line
    }

    /// The key a batch is resumed by: the same digest the gateway stores as `evidenceSHA256`.
    public var evidenceSHA256: String { SHA256Digest.lowercaseHex(receipt) }

    /// Reads a JSONL file strictly (unknown keys, duplicate keys and wrong types refused), skipping
    /// blank lines. A bad line is an error naming its line number, so a backlog is never half-read.
    public static func readJSONLines(_ url: URL) throws(VerificationError) -> [BatchReceipt] {
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw VerificationError(.invalidConfiguration, "cannot read \(url.path)")
        }
        return try parseJSONLines(data)
    }

    public static func parseJSONLines(_ data: Data) throws(VerificationError) -> [BatchReceipt] {
        var out: [BatchReceipt] = []
        let parser = StrictJSON(maxBytes: 4 << 20)
        for (index, slice) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let line = index + 1
            let bytes = slice.last == UInt8(ascii: "\r") ? slice.dropLast() : slice
            if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            do throws(VerificationError) {
                let value = try parser.parse(bytes)
                guard let object = value.objectValue else {
                    throw VerificationError(.malformedRequest, "not a JSON object")
                }
                if let extra = Set(object.keys).subtracting(["receipt", "account"]).sorted().first {
                    throw VerificationError(.malformedRequest, "unknown key \(extra)")
                }
                let fields = JSONFields(object, context: "line \(line)")
                let receipt = try fields.requiredString("receipt")
                guard !receipt.isEmpty else { throw VerificationError(.malformedRequest, "receipt is empty") }
                out.append(BatchReceipt(receipt: receipt, account: try fields.string("account"), line: line))
            } catch {
                throw VerificationError(error.code, "input line \(line): \(error.message)")
            }
        }
        return out
    }
}

/// What became of one receipt, as the state file keeps it: enough to resume a batch and to give
/// its summary over every run without reading the ledger back.
public struct BatchRecord: Sendable, Hashable {
    public enum Outcome: Sendable, Hashable {
        case agreed
        /// The difference kinds found (sorted, unique).
        case disagreed(kinds: [String])
        /// A path failed outright; its error code(s), legacy first.
        case failed(codes: [String])
    }

    public var evidenceSHA256: String
    public var comparisonId: String
    public var outcome: Outcome

    init(_ c: PurchaseComparison) {
        evidenceSHA256 = c.evidenceSHA256
        comparisonId = c.id
        if c.legacyError != nil || c.serverAPIError != nil {
            outcome = .failed(codes: [c.legacyError, c.serverAPIError].compactMap { $0 })
        } else if c.differences.isEmpty {
            outcome = .agreed
        } else {
            outcome = .disagreed(kinds: Set(c.differences.map(\.kind.rawValue)).sorted())
        }
    }

    /// One line of the state file: `sha256 id agreed` / `sha256 id disagreed kind,kind` / `sha256 id failed CODE,CODE`.
    var line: String {
        switch outcome {
        case .agreed: "\(evidenceSHA256) \(comparisonId) agreed"
        case .disagreed(let kinds): "\(evidenceSHA256) \(comparisonId) disagreed \(kinds.joined(separator: ","))"
        case .failed(let codes): "\(evidenceSHA256) \(comparisonId) failed \(codes.joined(separator: ","))"
        }
    }

    init?(line: Substring) {
        let parts = line.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count >= 3, parts[0].count == 64 else { return nil }
        let list = parts.count > 3 ? parts[3].split(separator: ",").map(String.init) : []
        switch parts[2] {
        case "agreed": outcome = .agreed
        case "disagreed": outcome = .disagreed(kinds: list)
        case "failed": outcome = .failed(codes: list)
        default: return nil
        }
        evidenceSHA256 = String(parts[0])
        comparisonId = String(parts[1])
    }
}

/// The append-only file a batch resumes from. A line is appended only after its comparison is in
/// the ledger; comparison ids are derived from the evidence, so a receipt compared again after a
/// crash between the two writes replaces its comparison instead of adding a second one.
final class BatchStateFile: Sendable {
    let url: URL
    private let handle: FileHandle

    init(url: URL) throws(VerificationError) {
        self.url = url
        let fm = FileManager.default
        if !fm.fileExists(atPath: url.path) {
            guard fm.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw VerificationError(.storageUnavailable, "cannot create \(url.path)")
            }
        }
        do {
            handle = try FileHandle(forUpdating: url)
            try handle.seekToEnd()
        } catch {
            throw VerificationError(.storageUnavailable, "cannot open \(url.path)")
        }
    }

    deinit { try? handle.close() }

    /// Every record written so far; a torn last line (a crash mid-write) is ignored.
    func records() throws(VerificationError) -> [String: BatchRecord] {
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw VerificationError(.storageUnavailable, "cannot read \(url.path)")
        }
        var out: [String: BatchRecord] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            if let record = BatchRecord(line: line) { out[record.evidenceSHA256] = record }
        }
        return out
    }

    /// Called from one task at a time (the batch's collector).
    func append(_ record: BatchRecord) throws(VerificationError) {
        do {
            try handle.write(contentsOf: Data((record.line + "\n").utf8))
        } catch {
            throw VerificationError(.storageUnavailable, "cannot append to \(url.path)")
        }
    }
}
