import Adapters

extension GatewayAssembly {
    /// Every adapter a production gateway runs, in registration order: the one list that names
    /// concrete adapters. A new adapter is its own folder and one element here.
    public static let productionAdapters: [any AdapterFactory] = [
        LegacyReceiptAdapter.Factory(),
        ServerAPIAdapter.Factory(),
    ]
}
