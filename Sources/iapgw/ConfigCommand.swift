import CommandLineSupport
import Foundation
import Gateway
import IAPConfig
import IAPCore

/// `iapgw config check [DIR]`: loads the gateway file and every app policy, checks trust roots exist
/// and secret references are usable, and lists every problem at once (exit 1 if any error).
/// Secret values are never read for printing; an unset variable is only a warning.
struct ConfigCommand: Subcommand {
    let name = "config"
    let summary = "check the per-app and gateway configuration"
    let usage = "usage: iapgw config check [DIR]   (DIR defaults to Config/)"

    func run(_ args: inout CommandLineArguments) throws -> Int32 {
        guard args.positional() == "check" else { throw UsageError(message: "expected: check") }
        let directory = args.positional() ?? "Config"
        try args.finish()
        var out = ""
        let ok = check(URL(fileURLWithPath: directory), into: &out)
        FileHandle.standardOutput.write(Data(out.utf8))
        return ok ? 0 : 1
    }

    private func check(_ directory: URL, into out: inout String) -> Bool {
        var ok = true
        let gateway: GatewayConfig
        do {
            let file = try ConfigLoader.findGatewayFile(configDirectory: directory)
            if let file {
                gateway = try ConfigLoader.loadGateway(file: file)
                out += "ok gateway (\(file.relativePath))\n"
            } else {
                gateway = GatewayConfig(appsDirectory: directory.appendingPathComponent("apps"))
                out += "ok gateway (no gateway.xml or gateway.plist: defaults)\n"
            }
        } catch {
            out += "error \(error)\n"
            return false
        }
        out += "  listen \(gateway.listenAddress):\(gateway.listenPort); storage \(gateway.storage.url)\n"
        out += "  verifyReceipt \(gateway.upstream.verifyReceipt.production) | \(gateway.upstream.verifyReceipt.sandbox)\n"
        out += "  serverAPI \(gateway.upstream.serverAPI.production) | \(gateway.upstream.serverAPI.sandbox)\n"
        out += "  timeouts connect \(gateway.timeouts.connectSeconds)s request \(gateway.timeouts.requestSeconds)s budget \(gateway.timeouts.budgetSeconds)s"
            + " storage \(gateway.timeouts.storageSeconds)s;"
            + " limits body \(gateway.limits.maxBodyBytes) B, JWS \(gateway.limits.maxJWSBytes) B,"
            + " connections \(gateway.limits.maxConnections) (\(gateway.limits.maxConnectionsPerClient) per client)\n"
        out += "  apps \(gateway.appsDirectory.relativePath)\n"
        let b = gateway.background
        out += "  background: reconcile every \(b.reconcileIntervalSeconds)s (0: off), notification bodies kept"
            + " \(b.notificationRetentionDays) days, audit records kept \(b.auditRetentionDays) days, entitlement sweep every \(b.entitlementSweepSeconds)s"
            + ", idempotency keys kept \(b.idempotencyKeyHours) h"
            + " (environment variables override); receipt seal key \(gateway.receiptSealKey?.description ?? "beside the SQLite file")\n"
        if let tls = gateway.tls {
            do {
                _ = try GatewayAssembly.loadTLS(tls)
                out += "  https: certificate \(tls.certificateFile.relativePath), key \(tls.privateKeyFile.relativePath),"
                    + " TLS \(tls.minimumVersion.rawValue) and later\n"
            } catch {
                out += "error \(error.message)\n"
                return false
            }
        } else {
            out += "  http (no tls section: plain HTTP, for a gateway behind a proxy)\n"
        }

        let results: [ConfigLoader.AppFileResult]
        do {
            results = try ConfigLoader.checkApps(directory: gateway.appsDirectory, adapters: GatewayAssembly.catalog())
        } catch {
            out += "error \(error)\n"
            return false
        }
        if results.isEmpty { out += "warning: no app policies in \(gateway.appsDirectory.relativePath)\n" }
        for entry in results {
            switch entry.result {
            case .failure(let error):
                ok = false
                out += "error \(error)\n"
            case .success(let policy):
                let diagnostics = policy.diagnostics()
                let hasError = diagnostics.contains { $0.severity == .error }
                if hasError { ok = false }
                out += "\(hasError ? "error" : "ok") \(policy.bundleId) (\(entry.format?.rawValue ?? "?")): \(policy.summary)\n"
                for d in diagnostics { out += "  \(d.severity.rawValue) \(entry.displayName): \(d.message)\n" }
            }
        }
        return ok
    }
}
