import CLibPQ
import IAPCore

/// What a failed statement is reported as: the operation and the SQLSTATE with its class's generic
/// meaning, never the server's message (it may quote values, keys or the connection's password).
extension PostgresConnection {
    static func storageError(_ operation: String, state: String?, connectionLost: Bool) -> VerificationError {
        guard let state, !connectionLost || state.hasPrefix("57") || state.hasPrefix("08") else {
            return VerificationError(.storageUnavailable,
                                     "storage: \(operation) failed (PostgreSQL connection lost)")
        }
        return VerificationError(.storageUnavailable,
                                 "storage: \(operation) failed (PostgreSQL SQLSTATE \(state): \(meaning(of: state)))")
    }

    /// The SQLSTATE class's name from the PostgreSQL manual (Appendix A): generic, never data.
    fileprivate static func meaning(of state: String) -> String {
        switch state {
        case "40001": return "serialization failure"
        case "40P01": return "deadlock detected"
        case "57P01", "57P02", "57P03": return "server shutting down or not accepting connections"
        case "25P02": return "transaction aborted by an earlier error"
        default: break
        }
        switch state.prefix(2) {
        case "08": return "connection exception"
        case "22": return "data exception"
        case "23": return "integrity constraint violation"
        case "25": return "invalid transaction state"
        case "28": return "invalid authorization"
        case "3D": return "invalid catalog name"
        case "3F": return "invalid schema name"
        case "40": return "transaction rollback"
        case "42": return "syntax error or access rule violation"
        case "53": return "insufficient resources"
        case "54": return "program limit exceeded"
        case "55": return "object not in prerequisite state"
        case "57": return "operator intervention"
        case "58": return "system error"
        case "XX": return "internal error"
        default: return "error"
        }
    }
}
