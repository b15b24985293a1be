// libFuzzer target: what a server sends back to `iapgw-dev pace` on a kept-alive connection. The
// first byte picks where the rest is cut in two; the reader must find the same responses (or fail
// with the same error) whether the bytes come at once or in two pieces, and never buffer past its
// limits. Run: Scripts/fuzz.sh 60 FuzzHTTPResponse
import LoadPacer

private func read(_ bytes: [UInt8], cut: Int) -> Result<[HTTPResponseReader.Response], HTTPResponseReader.ReadError> {
    var reader = HTTPResponseReader(maxHeaderBytes: 512, maxBodyBytes: 4096)
    do {
        let first = try bytes[..<cut].withUnsafeBytes { try reader.consume($0) }
        let second = try bytes[cut...].withUnsafeBytes { try reader.consume($0) }
        return .success(first + second)
    } catch {
        // consume throws only ReadError; the closure's rethrows is untyped.
        return .failure(error as! HTTPResponseReader.ReadError)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let rest = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let whole = read(rest, cut: 0)
    let split = read(rest, cut: rest.isEmpty ? 0 : Int(data[0]) % (rest.count + 1))
    switch (whole, split) {
    case (.success(let a), .success(let b)): precondition(a == b, "the responses depend on how the bytes were split")
    case (.failure(let a), .failure(let b)): precondition(a == b, "the error depends on how the bytes were split")
    default: preconditionFailure("success depends on how the bytes were split")
    }
    return 0
}
