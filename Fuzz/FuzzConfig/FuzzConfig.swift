// libFuzzer target: the same bytes go to the plain-XML and the property-list readers, for both an
// app policy and a gateway file. Any outcome but a VerificationError or a value is a bug (a crash,
// a hang, or a sanitizer report).
//
// Build: IAPGW_FUZZ=1 swift build --product FuzzConfig --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld
// Run:   ASAN_OPTIONS=detect_leaks=0 SWIFT_BACKTRACE=enable=no .build/debug/FuzzConfig -max_total_time=20 CORPUS_DIR
// (seed the corpus with Config/**/*.plist and *.xml). Leak detection is off because Foundation
// itself leaks the CFError it builds for every XML and property-list parse error (seen in CF and
// FoundationXML frames, never ours), which would otherwise stop the run at the first bad input.
import Foundation
import IAPConfig
import IAPCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    let base = URL(fileURLWithPath: "/nonexistent/config")
    for format in ConfigFormat.allCases {
        _ = try? ConfigLoader.decodeAppPolicy(bytes, format: format, displayName: "fuzz.\(format.rawValue)",
                                              baseDirectory: base, expectedBundleId: "com.fuzz.app")
        _ = try? ConfigLoader.decodeGateway(bytes, format: format, displayName: "gateway.\(format.rawValue)",
                                            baseDirectory: base)
    }
    return 0
}
