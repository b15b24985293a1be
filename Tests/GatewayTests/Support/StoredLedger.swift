@testable import Gateway
import Ledger

extension GatewayParts {
    /// The gateway's own ledger, read synchronously by a test (the gateway itself awaits it).
    var storedLedger: SQLLedger {
        guard let ledger = ledger as? AsyncSQLLedger else { preconditionFailure("the assembly builds an AsyncSQLLedger") }
        return ledger.ledger
    }
}
