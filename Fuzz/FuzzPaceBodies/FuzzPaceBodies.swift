// libFuzzer target: the bodies file of `iapgw-dev pace --bodies` (outside input: a pool the
// benchmark wrote, or anything a user points it at). The first byte picks the line limit (1...256),
// the rest is the file. BodiesFile.lines must agree with a plain split on LF (the last LF optional):
// the same lines, or the same refusal for the first bad one. Run: Scripts/fuzz.sh 60 FuzzPaceBodies
import LoadPacer

private func reference(_ bytes: [UInt8], maxLineBytes: Int) -> Result<[[UInt8]], BodiesFile.Refused> {
    var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
    if lines.last?.isEmpty == true { lines.removeLast() }
    for (number, line) in zip(1..., lines) {
        if line.count > maxLineBytes { return .failure(.init(reason: "line \(number) is over the limit of \(maxLineBytes) bytes")) }
        if line.isEmpty || line.last == 0x0D {
            return .failure(.init(reason: "line \(number) is empty or ends in CR (one body per LF-terminated line)"))
        }
    }
    return .success(lines)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let maxLineBytes = Int(data[0]) + 1
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let found = Result { () throws(BodiesFile.Refused) in
        try bytes.withUnsafeBytes { buffer throws(BodiesFile.Refused) in
            try BodiesFile.lines(in: buffer, maxLineBytes: maxLineBytes).map { Array(bytes[$0]) }
        }
    }
    switch (found, reference(bytes, maxLineBytes: maxLineBytes)) {
    case (.success(let a), .success(let b)): precondition(a == b, "the lines differ from a split on LF")
    case (.failure(let a), .failure(let b)): precondition(a == b, "the refusal differs: \(a) vs \(b)")
    default: preconditionFailure("accepted by one and refused by the other")
    }
    return 0
}
