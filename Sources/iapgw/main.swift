// iapgw: the IAPGateway command line for production. Each subcommand lives in its own file; this
// table is the only place that names them all. It links no test machinery (TestPKI, the App Store
// simulator, the demo): those are in `iapgw-dev` (demo, sim, bench). Exit codes: 0 ok, 1
// refused/invalid input, 2 usage error.
import CommandLineSupport

prepareStandardDescriptors()
await runCommandLine(tool: "iapgw", subcommands: [
    ServeCommand(), ReconcileCommand(), NotificationsCommand(), JWSCommand(), ReceiptCommand(), MappingsCommand(),
    ConfigCommand(), CompareCommand(), AuditCommand(), RolloutCommand(), BackupCommand(), RestoreCommand(),
    MigrateStorageCommand(),
])
