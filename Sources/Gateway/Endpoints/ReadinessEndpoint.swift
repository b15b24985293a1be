import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// GET /readyz: storage answers, every app's trust roots are readable, and every secret it names
/// has a value to serve. The probe is public, so what is wrong goes to the log only.
struct ReadinessEndpoint: Sendable {
    let apps: [String: AppPolicy]
    let ledger: any Ledger
    /// The process environment the policies' secret references resolve in.
    let environment: [String: String]
    let logger: Logger
    /// The owner of the secret files' contents: the probe asks it what it last read, never the disk.
    var secrets: SecretFiles = .shared

    /// Where the trust-root files are checked: a hung mount must not stall a pool thread. One thread:
    /// while it hangs, further probes queue briefly, then are refused (not ready) at once.
    static let fileChecks = BlockingExecutor(purpose: "readiness", unavailable: .invalidConfiguration,
                                             limits: .init(threads: 1, queueCapacity: 4, deadline: AsyncSQLLedger.readinessDeadline))

    func answer() async throws(VerificationError) -> HTTPResponse {
        try await ledger.ping()
        // A trust root unreadable now, or a secret never read since start, makes every verification
        // of its app fail: not ready. A secret whose refresh failed still serves its last good value.
        let (problems, stale) = await configurationProblems()
        for problem in stale { logger.warning("secret_stale", problem) }
        guard problems.isEmpty else {
            for problem in problems { logger.error("not_ready", problem) }
            return .json(503, Self.status.encode(Probe(status: "not ready", reason: "configuration")).jsonText)
        }
        return .json(200, Self.status.encode(Probe(status: "ready")).jsonText)
    }

    /// A probe's answer; `reason` says what is not ready (never which file or secret: the probe is public).
    struct Probe: Sendable {
        let status: String
        var reason: String?
    }

    static let status = JSONShape<Probe>.object([
        .required("status", .oneOf(["ok", "ready", "not ready"])) { $0.status },
        .optional("reason", .oneOf(["configuration"])) { $0.reason },
    ]).named("Status")

    /// What the policies need and do not have (trust roots, secrets never read; never values), and
    /// the secret files served stale.
    func configurationProblems() async -> (notReady: [[String: String]], stale: [[String: String]]) {
        let sorted = apps.values.sorted { $0.bundleId < $1.bundleId }
        var notReady: [[String: String]] = []
        var stale: [[String: String]] = []
        do throws(VerificationError) {
            let roots = try await Self.fileChecks.run { sorted.map { ($0.bundleId, $0.trustRootProblems) } }
            notReady += roots.flatMap { bundleId, found in found.map { ["bundleId": bundleId, "problem": $0] } }
        } catch {
            notReady.append(["problem": "trust roots not checked within \(AsyncSQLLedger.readinessDeadline)"])
        }
        for app in sorted {
            for (setting, source) in app.secretSources {
                let problem: (String) -> [String: String] = { ["bundleId": app.bundleId, "problem": "\(setting): \($0)"] }
                switch source {
                case .environmentVariable:
                    if let missing = SecretReference.availability(source, environment: environment) { notReady.append(problem(missing)) }
                case .file(let url):
                    switch secrets.standing(url) {
                    case .fresh: break
                    case .stale: stale.append(problem("\(source) failed its last refresh"))
                    case .unread: notReady.append(problem("\(source) has not been read since start"))
                    }
                }
            }
        }
        return (notReady, stale)
    }
}

extension ReadinessEndpoint: RouteDeclaring {
    static let routes: [Route] = [
        Route("GET", "/healthz", name: "healthz", answer: status, summary: "Liveness",
              handler: .open { _, _, _ in .json(200, status.encode(Probe(status: "ok")).jsonText) }),
        Route("GET", "/readyz", name: "readyz", answer: status, summary: "Readiness (storage answers within 1 s and takes writes)",
              refusals: ["503": .json("not ready: the storage does not answer (the error envelope), or the configuration cannot serve (this)", status, orError: true)],
              handler: .open { endpoints, _, _ throws(VerificationError) in try await endpoints.readiness.answer() }),
    ]
}
