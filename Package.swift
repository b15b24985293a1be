// swift-tools-version:6.0
import PackageDescription
import Foundation

// IAPGateway: one job per target; C libraries come from Debian as system library targets.
var targets: [Target] = [
    .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
                   providers: [.apt(["libssl-dev"])]),

    .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(name: "CLibPQ", path: "Sources/CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
    .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD", pkgConfig: "libmicrohttpd",
                   providers: [.apt(["libmicrohttpd-dev"])]),
    .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                   providers: [.apt(["libcurl4-openssl-dev"])]),

    // Canonical model, error codes, strict JSON, lifecycle, logging. Foundation only.
    .target(name: "IAPCore", dependencies: []),

    // Configuration: the gateway and per-app policy files (plist / XML / JSON readers with file and
    // line), secret references, storage choice.
    .target(name: "IAPConfig", dependencies: ["IAPCore"]),

    // Mapping files: how Apple's fields become canonical records, and which differences between the
    // two generations are known (the purchase comparator reads them).
    .target(name: "IAPMapping", dependencies: ["IAPCore"]),

    // Apple's chain of trust: ES256, X.509 against pinned roots, JWS, JWT signing; OCSP over UpstreamHTTP. No app
    // config: a verifier is given the small values it checks (roots, bundle id, app id, environments).
    .target(name: "AppleTrust", dependencies: ["IAPCore", "UpstreamHTTP", "COpenSSL"]),

    // Legacy receipts: BER/DER reader, PKCS#7 SignedData, receipt payload, signature check.
    .target(name: "AppReceipts", dependencies: ["IAPCore", "AppleTrust", "COpenSSL"]),

    // A private PKI that mimics Apple's (root, WWDR-like intermediate, leaf, broken variants).
    // Used by tests, the simulator and benchmarks; never trusted by a production policy.
    .target(name: "TestPKI", dependencies: ["IAPCore", "AppleTrust", "COpenSSL"]),

    // Durable state after verification: nonces, ownership, grants, entitlements, audit (SQLite or PostgreSQL).
    .target(name: "Ledger", dependencies: ["IAPCore", "IAPConfig", "AppleTrust", "CSQLite", "CLibPQ"]),

    // HTTP/1.1 serving on libmicrohttpd: transport only; handlers are plain async functions.
    .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "IAPCore"]),

    // Outgoing HTTPS to Apple (and plain HTTP to loopback simulators) on libcurl.
    .target(name: "UpstreamHTTP", dependencies: ["IAPCore", "CCurl"]),

    // The plugin protocol (VerificationAdapter) and the adapters: verifyReceipt, App Store Server API.
    .target(name: "Adapters", dependencies: ["IAPCore", "IAPConfig", "IAPMapping", "AppleTrust", "AppReceipts", "UpstreamHTTP"]),

    // The gateway: policy checks, entitlements, routes, auth, nonces (transport-free handlers).
    .target(name: "Gateway", dependencies: ["IAPCore", "IAPConfig", "IAPMapping", "AppleTrust", "Adapters", "Ledger",
                                            "HTTPServer", "UpstreamHTTP"]),

    // A local App Store on loopback: its own test PKI, receipts, verifyReceipt, the Server API,
    // notifications and fault injection. For tests, the demo and benchmarks; never for production.
    .target(name: "AppStoreSimulator", dependencies: ["IAPCore", "AppleTrust", "AppReceipts", "TestPKI", "HTTPServer",
                                                       "UpstreamHTTP", "COpenSSL"]),

    // A gateway wired to the simulator through real config files: `iapgw-dev demo` and end-to-end tests.
    .target(name: "Demo", dependencies: ["Gateway", "AppStoreSimulator", "AppleTrust", "IAPCore", "IAPConfig", "HTTPServer"]),

    // A Swift client for app backends (Foundation only): typed nonce / verify / entitlements, appAccountToken.
    .target(name: "IAPGatewayClient", dependencies: []),

    // The benchmarks' evenly paced load generator (`iapgw-dev pace`): sockets and epoll, loopback only.
    .systemLibrary(name: "CPoll", path: "Sources/CPoll"),
    .target(name: "LoadPacer", dependencies: ["CPoll"]),

    // What both executables share: subcommands, strict argument reading, exit codes (after the log is written).
    .target(name: "CommandLineSupport", dependencies: ["IAPCore"]),

    // Production: links no test machinery (CommandLineTests checks its symbols for TestPKI and the simulator).
    .executableTarget(name: "iapgw", dependencies: ["CommandLineSupport", "IAPCore", "IAPConfig", "IAPMapping", "AppleTrust",
                                                    "AppReceipts", "Adapters", "Gateway", "Ledger"]),

    // Development: the demo, the simulator alone and the benchmarks, on the test PKI.
    .executableTarget(name: "iapgw-dev", dependencies: ["CommandLineSupport", "IAPCore", "IAPConfig", "AppleTrust", "AppReceipts",
                                                        "TestPKI", "Gateway", "Ledger", "AppStoreSimulator", "Demo",
                                                        "UpstreamHTTP", "LoadPacer", "COpenSSL", "HTTPServer"]),

    // What tests share (the seeded generator, the end-to-end harness); linked by tests only.
    .target(name: "TestSupport", dependencies: ["Demo", "AppStoreSimulator", "AppleTrust", "IAPConfig", "IAPCore", "HTTPServer",
                                                "UpstreamHTTP"], path: "Tests/TestSupport"),

    .testTarget(name: "IAPCoreTests", dependencies: ["IAPCore", "IAPConfig", "IAPMapping", "TestSupport"], exclude: ["Fixtures"]),
    .testTarget(name: "AppleTrustTests", dependencies: ["AppleTrust", "TestPKI", "IAPCore"]),
    .testTarget(name: "LedgerTests", dependencies: ["Ledger", "IAPCore", "AppleTrust"]),
    .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer"]),
    .testTarget(name: "LoadPacerTests", dependencies: ["LoadPacer"]),
    .testTarget(name: "UpstreamHTTPTests", dependencies: ["UpstreamHTTP"]),
    .testTarget(name: "AdaptersTests", dependencies: ["Adapters", "IAPMapping", "Gateway", "TestPKI", "IAPCore", "IAPConfig", "AppleTrust",
                                                      "UpstreamHTTP", "HTTPServer", "AppReceipts"]),
    .testTarget(name: "AppStoreSimulatorTests", dependencies: ["AppStoreSimulator", "IAPMapping", "AppleTrust", "AppReceipts",
                                                               "IAPCore", "UpstreamHTTP"]),
    .testTarget(name: "GatewayTests", dependencies: ["TestSupport", "Gateway", "IAPMapping", "Demo", "Adapters", "AppStoreSimulator", "Ledger", "HTTPServer",
                                                     "UpstreamHTTP", "TestPKI", "IAPCore", "IAPConfig", "AppleTrust", "CommandLineSupport",
                                                     "IAPGatewayClient"]),
    .testTarget(name: "IAPGatewayClientTests", dependencies: ["IAPGatewayClient", "Demo", "Gateway", "AppStoreSimulator",
                                                             "HTTPServer", "UpstreamHTTP", "IAPCore", "AppleTrust", "TestPKI"]),
    .testTarget(name: "AppReceiptsTests", dependencies: ["AppReceipts", "AppleTrust", "TestPKI", "IAPCore", "COpenSSL"]),
]

var products: [Product] = [.executable(name: "iapgw", targets: ["iapgw"]),
                           .executable(name: "iapgw-dev", targets: ["iapgw-dev"])]
products.append(.library(name: "IAPGatewayClient", targets: ["IAPGatewayClient"]))

// libFuzzer targets are built only by Scripts/fuzz.sh (IAPGW_FUZZ=1): they have no main().
if ProcessInfo.processInfo.environment["IAPGW_FUZZ"] != nil {
    for (name, deps) in [("FuzzJWS", ["AppleTrust", "IAPCore"]),
                         ("FuzzSignedJWS", ["AppleTrust", "IAPCore", "TestPKI"]),
                         ("FuzzDER", ["AppReceipts"]),
                         ("FuzzPKCS7", ["AppReceipts", "AppStoreSimulator", "IAPCore", "TestPKI"]),
                         ("FuzzOCSP", ["AppleTrust", "IAPCore", "TestPKI"]),
                         ("FuzzConfig", ["IAPCore", "IAPConfig"]),
                         ("FuzzJSON", ["IAPCore", "IAPMapping"]),
                         ("FuzzMappings", ["IAPCore", "IAPMapping"]),
                         ("FuzzNotification", ["Adapters", "Gateway", "HTTPServer", "IAPCore", "IAPConfig", "IAPMapping", "UpstreamHTTP"]),
                         ("FuzzServerAPI", ["Adapters", "HTTPServer", "IAPCore", "IAPConfig", "UpstreamHTTP"]),
                         ("FuzzRequest", ["Adapters", "Gateway", "HTTPServer", "IAPCore"]),
                         ("FuzzCompareInput", ["Gateway", "IAPCore"]),
                         ("FuzzHTTPResponse", ["LoadPacer"]),
                         ("FuzzPaceBodies", ["LoadPacer"])] {
        targets.append(.executableTarget(
            name: name, dependencies: deps.map { .target(name: $0) }, path: "Fuzz/\(name)",
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]))
        products.append(.executable(name: name, targets: [name]))
    }
}

let package = Package(
    name: "IAPGateway",
    platforms: [.macOS(.v15)],
    products: products,
    targets: targets,
    swiftLanguageModes: [.v6]
)
