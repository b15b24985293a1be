import CommandLineSupport
import Foundation
import Gateway
import IAPCore

/// `iapgw rollout`: an app's receipt rollout by hand, on the ledger every instance reads (each
/// follows a change within a second).
struct RolloutCommand: Subcommand {
    let name = "rollout"
    let summary = "an app's receipt rollout: status, advance, pause or rollback"
    let usage = """
        usage: iapgw rollout (status | advance | pause | rollback) --app BUNDLE [--config DIR] [--mappings DIR]
          status    prints the step, its percentage, the guard's findings, the plan and the timeline (JSON,
                    as GET /v1/apps/BUNDLE/rollout answers)
          advance   to the plan's next step (out of a pause); refused while the guard trips
          pause     no automatic advance; routing stays as it is
          rollback  to the step before (or 0 %), paused
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        let config = URL(fileURLWithPath: try args.value("--config") ?? "Config", isDirectory: true)
        let mappings = URL(fileURLWithPath: try args.value("--mappings") ?? "Mappings", isDirectory: true)
        guard let bundleId = try args.value("--app") else { throw UsageError(message: "rollout needs --app BUNDLE") }
        // The options are read first: what is left is the action.
        guard let word = args.positional(), let action = RolloutAction(rawValue: word) else {
            throw UsageError(message: "rollout needs one of \(RolloutAction.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        try args.finish()
        let (_, parts) = try await GatewayAssembly.open(configDirectory: config, mappingsDirectory: mappings,
                                                        logger: Logger.standardError())
        print(try await parts.rollout(bundleId: bundleId, action: action).jsonText)
        return 0
    }
}
