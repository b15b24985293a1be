import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /readyz: storage answers, and every app's trust roots and secret references are readable.
/// The probe is public, so what is wrong goes to the log only.
struct ReadinessEndpoint: Sendable {
    let apps: [String: AppPolicy]
    let ledger: any Ledger
    /// The process environment the policies' secret references resolve in.
    let environment: [String: String]
    let logger: Logger

    func answer() async throws(VerificationError) -> HTTPResponse {
        try await ledger.ping()
        // A trust root or secret that became unreadable since start makes every verification of
        // its app fail: not ready.
        let problems = configurationProblems()
        guard problems.isEmpty else {
            for problem in problems { logger.error("not_ready", problem) }
            return .json(503, #"{"status":"not ready","reason":"configuration"}"#)
        }
        return .json(200, #"{"status":"ready"}"#)
    }

    /// What the policies need and cannot read now: trust roots and secret references (never values).
    func configurationProblems() -> [[String: String]] {
        apps.values.sorted { $0.bundleId < $1.bundleId }.flatMap { app in
            app.diagnostics(environment: environment).map { ["bundleId": app.bundleId, "problem": $0.message] }
        }
    }
}
