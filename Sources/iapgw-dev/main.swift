// iapgw-dev: what runs against the test PKI and the built-in App Store simulator, kept out of the
// production `iapgw`: the demo, the simulator alone, and the benchmarks. Exit codes as `iapgw`'s.
import CommandLineSupport

prepareStandardDescriptors()
await runCommandLine(tool: "iapgw-dev", subcommands: [
    DemoCommand(), SimCommand(), BenchCommand(), BenchNotificationsCommand(), BenchRetentionCommand(), BenchWebhooksCommand(),
    PaceCommand(),
])
