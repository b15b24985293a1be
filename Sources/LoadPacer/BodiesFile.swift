import Glibc

/// One request body per line of a file, for runs where every request must differ (new grants: each
/// a purchase nobody has claimed yet). The file is mapped, not read: a pool of 100,000 signed
/// transactions is ~400 MB, and the generator touches each line once, when its request is sent.
/// Every line is checked before the run, so a bad file fails at the start with its line number,
/// not half-way through the schedule.
public final class BodiesFile: @unchecked Sendable {  // read-only after init: the mapping is never written
    public struct Refused: Error, Equatable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// The gateway's own request-body limit is far below this; a longer line is not a body anyone meant.
    public static let defaultMaxLineBytes = 1 << 20

    private let base: UnsafeRawPointer?
    private let mappedBytes: Int
    private let lines: [Range<Int>]

    public var count: Int { lines.count }

    public init(path: String, maxLineBytes: Int = BodiesFile.defaultMaxLineBytes) throws(Refused) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Refused(reason: "cannot open the bodies file \(path)") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw Refused(reason: "the bodies file \(path) is not a regular file")
        }
        mappedBytes = Int(info.st_size)
        if mappedBytes == 0 {
            base = nil
        } else {
            guard let mapped = mmap(nil, mappedBytes, PROT_READ, MAP_PRIVATE, fd, 0), mapped != MAP_FAILED else {
                throw Refused(reason: "cannot map the bodies file \(path)")
            }
            base = UnsafeRawPointer(mapped)
        }
        do {
            lines = try Self.lines(in: UnsafeRawBufferPointer(start: base, count: mappedBytes), maxLineBytes: maxLineBytes)
        } catch {
            if let base { munmap(UnsafeMutableRawPointer(mutating: base), mappedBytes) }
            throw Refused(reason: "the bodies file \(path): \(error.reason)")
        }
    }

    deinit {
        if let base { munmap(UnsafeMutableRawPointer(mutating: base), mappedBytes) }
    }

    /// Line `index` (0-based), without its newline.
    public func body(_ index: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(start: base, count: mappedBytes)[lines[index]])
    }

    /// The lines of `bytes`: separated by LF, the last one's LF optional. An empty line (a blank
    /// line or a CR LF file's CR) would be a request nobody meant to send, so it is refused with
    /// its number, as is a line over `maxLineBytes` (found without reading on past the limit).
    public static func lines(in bytes: UnsafeRawBufferPointer, maxLineBytes: Int) throws(Refused) -> [Range<Int>] {
        var lines: [Range<Int>] = []
        var start = 0
        while start < bytes.count {
            let window = min(bytes.count - start, maxLineBytes + 1)
            let newline = memchr(bytes.baseAddress! + start, 0x0A, window).map { $0 - UnsafeMutableRawPointer(mutating: bytes.baseAddress!) }
            let end = newline ?? start + window
            guard end - start <= maxLineBytes else {
                throw Refused(reason: "line \(lines.count + 1) is over the limit of \(maxLineBytes) bytes")
            }
            guard end > start, bytes[end - 1] != 0x0D else {
                throw Refused(reason: "line \(lines.count + 1) is empty or ends in CR (one body per LF-terminated line)")
            }
            lines.append(start..<end)
            start = end + 1
        }
        return lines
    }
}
