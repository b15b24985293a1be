import CommandLineSupport
import Foundation
import Gateway
import IAPConfig
import IAPCore

/// `iapgw serve`: the gateway service, configured from `Config/` and `Mappings/`.
struct ServeCommand: Subcommand {
    let name = "serve"
    let summary = "run the gateway service (HTTP API) from Config/ and Mappings/"
    let usage = """
        usage: iapgw serve [--config DIR] [--mappings DIR]
          --config    configuration directory with gateway.xml|plist and apps/ (default Config)
          --mappings  mapping files (default Mappings)
          Logs JSON lines to stderr. SIGTERM or SIGINT: stop accepting, finish in-flight requests (10 s), exit.
        """

    func run(_ args: inout CommandLineArguments) async throws -> Int32 {
        let config = URL(fileURLWithPath: try args.value("--config") ?? "Config", isDirectory: true)
        let mappings = URL(fileURLWithPath: try args.value("--mappings") ?? "Mappings", isDirectory: true)
        try args.finish()
        let logger = Logger.standardError()
        // Handled from before the socket is bound: a SIGTERM sent once it answers stops it cleanly.
        let signals = TerminationSignals()
        // Files read and the ledger's database opened on a thread of their own, within a deadline.
        let (assembly, parts) = try await GatewayAssembly.open(configDirectory: config, mappingsDirectory: mappings, logger: logger)
        let configuration = assembly.configuration
        let (service, server, background) = try await assembly.start(parts)
        logger.info("listening", ["address": configuration.gateway.listenAddress, "port": String(server.port),
                                  "scheme": configuration.gateway.tls == nil ? "http" : "https",
                                  "apps": configuration.apps.keys.sorted().joined(separator: ",")])
        let signal = await signals.wait()
        logger.info("shutting_down", ["signal": String(signal), "inFlight": String(server.inFlight)])
        await server.shutdown(gracePeriod: .seconds(10))
        await service.finishShadowWork()
        background.cancel()
        _ = await background.value
        logger.info("stopped")
        return 0
    }
}
