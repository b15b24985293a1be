import Adapters
import AppleTrust
import CommandLineSupport
import Foundation
import Gateway
import IAPConfig
import IAPCore

/// `iapgw jws verify`: one compact JWS per stdin line in, one JSON verdict per stdout line out.
struct JWSCommand: Subcommand {
    let name = "jws"
    let summary = "verify App Store JWS (transactions, renewals, notifications) from stdin"
    let usage = """
        usage: iapgw jws verify --kind transaction|renewal|notification|app-transaction
                                (--root PATH [--root PATH ...] --bundle-id ID [--app-apple-id N]
                                 --environment Production|Sandbox|Xcode|LocalTesting [--environment ...]
                                 | --app Config/apps/FILE)
                                [--online-checks]
          reads one compact JWS per line on stdin; writes one JSON object per line:
            {"valid":true,"payload":{...},"inner":{...}} or {"valid":false,"error":"CODE","message":"..."}
          exit 0 if every line was valid, 1 if any was not or stdin held none, 2 on a usage error.
          Xcode/LocalTesting in --environment also allows local test data (still verified against --root).
          --app takes roots, bundle id, app Apple id, environments and online checks from an app policy
          file; it cannot be combined with the flags it replaces.
        """

    enum Kind: String { case transaction, renewal, notification, appTransaction = "app-transaction" }

    /// Everything the verifier needs, from flags. `--app Config/apps/FILE` takes it from an app
    /// policy instead (`SignedDataVerifier(policy:)`), and refuses the flags it replaces.
    struct VerifierSettings {
        var rootPaths: [String]
        var bundleId: String
        var appAppleId: Int64?
        var environments: Set<AppStoreEnvironment>
        var onlineChecks: Bool

        func makeVerifier() throws -> SignedDataVerifier {
            var roots: [Data] = []
            for path in rootPaths {
                guard let der = FileManager.default.contents(atPath: path) else {
                    throw UsageError(message: "cannot read root certificate \(path)")
                }
                roots.append(der)
            }
            do {
                return try SignedDataVerifier(
                    rootCertificates: roots, bundleId: bundleId, appAppleId: appAppleId, environments: environments,
                    enableOnlineChecks: onlineChecks,
                    allowLocalTestEnvironments: environments.contains(where: \.isLocalTest))
            } catch {
                throw UsageError(message: "cannot set up the verifier: \(error)")
            }
        }
    }

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        guard args.positional() == "verify" else { throw UsageError(message: "expected the action: verify") }
        guard let kindText = try args.value("--kind") else { throw UsageError(message: "--kind is required") }
        guard let kind = Kind(rawValue: kindText) else { throw UsageError(message: "unknown --kind \(kindText)") }
        let verifier: SignedDataVerifier
        if let appFile = try args.value("--app") {
            let onlineChecks = args.flag("--online-checks")
            for flag in ["--root", "--bundle-id", "--app-apple-id", "--environment"] where try !args.values(flag).isEmpty {
                throw UsageError(message: "\(flag) cannot be combined with --app")
            }
            try args.finish()
            verifier = try Self.verifier(appFile: appFile, onlineChecks: onlineChecks)
        } else {
            let settings = try readSettings(&args)
            try args.finish()
            verifier = try settings.makeVerifier()
        }

        var allValid = true
        var verified = 0
        while let line = readLine(strippingNewline: true) {
            // Cheap trim (Foundation's trimmingCharacters walks UTF-16 and dominated a profile).
            let jws = Self.trimmed(line)
            if jws.isEmpty { continue }
            verified += 1
            let verdict: JSONValue
            do {
                // With --online-checks the OCSP answers are awaited around the verification.
                verdict = try await verifier.verifying { v throws(VerificationError) in try Self.verify(jws, kind: kind, with: v) }
            } catch {
                allValid = false
                verdict = .object(["valid": .bool(false), "error": .string(error.code.rawValue), "message": .string(error.message)])
            }
            print(verdict.jsonText)
        }
        // Nothing verified must not read as "every line was valid" (an empty pipe, a wrong file).
        guard verified > 0 else {
            LogWriter.standardError.write("iapgw jws: no JWS on stdin (one compact JWS per line)")
            return 1
        }
        return allValid ? 0 : 1
    }

    static func verifier(appFile: String, onlineChecks: Bool) throws -> SignedDataVerifier {
        do {
            var policy = try ConfigLoader.loadAppPolicy(file: URL(fileURLWithPath: appFile), adapters: GatewayAssembly.catalog())
            policy.onlineChecks = policy.onlineChecks || onlineChecks
            return try SignedDataVerifier(policy: policy)
        } catch {
            throw UsageError(message: "\(error)")
        }
    }

    static func trimmed(_ line: String) -> String {
        let u = line.utf8
        func blank(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0D }
        guard let first = u.firstIndex(where: { !blank($0) }), let last = u.lastIndex(where: { !blank($0) }) else { return "" }
        if first == u.startIndex && last == u.index(before: u.endIndex) { return line }
        return String(line[first...last])
    }

    private func readSettings(_ args: inout CommandLineArguments) throws -> VerifierSettings {
        let roots = try args.values("--root")
        guard !roots.isEmpty else { throw UsageError(message: "at least one --root is required") }
        guard let bundleId = try args.value("--bundle-id") else { throw UsageError(message: "--bundle-id is required") }
        var appAppleId: Int64?
        if let text = try args.value("--app-apple-id") {
            guard let n = Int64(text), n > 0 else { throw UsageError(message: "--app-apple-id must be a positive integer") }
            appAppleId = n
        }
        var environments: Set<AppStoreEnvironment> = []
        for text in try args.values("--environment") {
            let env = AppStoreEnvironment(rawValue: text)
            guard env.isKnown else { throw UsageError(message: "unknown --environment \(text)") }
            environments.insert(env)
        }
        guard !environments.isEmpty else { throw UsageError(message: "at least one --environment is required") }
        return VerifierSettings(rootPaths: roots, bundleId: bundleId, appAppleId: appAppleId,
                                environments: environments, onlineChecks: args.flag("--online-checks"))
    }

    static func verify(_ jws: String, kind: Kind, with verifier: SignedDataVerifier) throws(VerificationError) -> JSONValue {
        var out: [String: JSONValue] = ["valid": .bool(true)]
        switch kind {
        case .transaction: out["payload"] = try verifier.verifyAndDecodeTransaction(jws).raw
        case .renewal: out["payload"] = try verifier.verifyAndDecodeRenewalInfo(jws).raw
        case .appTransaction: out["payload"] = try verifier.verifyAndDecodeAppTransaction(jws).raw
        case .notification:
            let n = try verifier.verifyAndDecodeNotification(jws)
            out["payload"] = n.raw
            out["inner"] = .object(n.innerPayloads)
        }
        return .object(out)
    }
}
