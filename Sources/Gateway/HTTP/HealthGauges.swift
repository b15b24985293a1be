import IAPCore
import Ledger

/// What `/readyz` answers, as gauges, for a Prometheus that scrapes `/metrics` and probes nothing:
/// whether storage answers (after a failed write, whether it takes writes again: `Ledger.ping`)
/// and whether the gateway is ready (storage, trust roots, secrets). Read with the storage gauges,
/// so a scrape never waits on them for long (`StorageGauges`).
enum HealthGauges {
    struct Reading {
        let storageUp: Bool
        let text: String
    }

    static func read(ledger: any Ledger, readiness: ReadinessEndpoint?) async -> Reading {
        var storageUp = true
        do { try await ledger.ping() } catch { storageUp = false }
        var ready = storageUp
        if storageUp, let readiness { ready = await readiness.configurationProblems().notReady.isEmpty }
        let text = "# HELP iapgw_storage_up 1 while storage answers (and takes writes, once one failed), else 0.\n"
            + "# TYPE iapgw_storage_up gauge\niapgw_storage_up \(storageUp ? 1 : 0)\n"
            + "# HELP iapgw_ready 1 while GET /readyz would answer ready, else 0.\n"
            + "# TYPE iapgw_ready gauge\niapgw_ready \(ready ? 1 : 0)\n"
        return Reading(storageUp: storageUp, text: text)
    }
}
