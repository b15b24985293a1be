// libFuzzer target: the bodies file of `iapgw-dev pace --bodies` (outside input: a pool the
// benchmark wrote, or anything a user points it at). The first byte picks the line limit (1...256),
// the rest is the file. BodiesFile.lines must agree with a plain split on LF (the last LF optional):
// the same lines, or the same refusal for the first bad one. Run: Scripts/fuzz.sh 60 FuzzPaceBodies
import LoadPacer

private enum Outcome: Equatable {
    case lines([[UInt8]])
    case refused(String)
}

private func reference(_ bytes: [UInt8], maxLineBytes: Int) -> Outcome {
    var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
    if lines.last?.isEmpty == true { lines.removeLast() }
    for (number, line) in zip(1..., lines) {
        if line.count > maxLineBytes { return .refused("line \(number) is over the limit of \(maxLineBytes) bytes") }
        if line.isEmpty || line.last == 0x0D {
            return .refused("line \(number) is empty or ends in CR (one body per LF-terminated line)")
        }
    }
    return .lines(lines)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let maxLineBytes = Int(data[0]) + 1
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let found: Outcome
    do {
        found = .lines(try bytes.withUnsafeBytes { try BodiesFile.lines(in: $0, maxLineBytes: maxLineBytes) }.map { Array(bytes[$0]) })
    } catch {
        // lines throws only Refused; withUnsafeBytes's rethrows is untyped.
        found = .refused((error as! BodiesFile.Refused).reason)
    }
    let expected = reference(bytes, maxLineBytes: maxLineBytes)
    precondition(found == expected, "BodiesFile.lines: \(found), a split on LF: \(expected)")
    return 0
}
