import IAPCore

extension SQLLedger {
    public func rolloutState(bundleId: String) throws(VerificationError) -> RolloutState? {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT step, percent, step_started_at, paused, revision FROM rollouts WHERE bundle_id = ?
                """, .text(bundleId)) { (row) throws(VerificationError) in
                RolloutState(bundleId: bundleId, step: Int(try row.requiredInteger(0)), percent: Int(try row.requiredInteger(1)),
                             stepStartedAt: try row.requiredInteger(2), paused: try row.requiredInteger(3) != 0,
                             revision: try row.requiredInteger(4))
            }.first
        }
    }

    public func changeRollout(expected: RolloutState?, next: RolloutState, event: RolloutEvent, webhooks: [WebhookEvent])
        throws(VerificationError) -> Bool {
        try database.transaction { (connection) throws(VerificationError) -> Bool in
            let values: [SQLValue] = [.integer(Int64(next.step)), .integer(Int64(next.percent)), .integer(next.stepStartedAt),
                                      .integer(next.paused ? 1 : 0), .integer((expected?.revision ?? 0) + 1), .integer(event.at)]
            let changed: Int
            if let expected {
                changed = try connection.run("""
                    UPDATE rollouts SET step = ?, percent = ?, step_started_at = ?, paused = ?, revision = ?, updated_at = ?
                    WHERE bundle_id = ? AND revision = ?
                    """, values + [.text(next.bundleId), .integer(expected.revision)])
            } else {
                changed = try connection.run("""
                    INSERT INTO rollouts (step, percent, step_started_at, paused, revision, updated_at, bundle_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (bundle_id) DO NOTHING
                    """, values + [.text(next.bundleId)])
            }
            guard changed == 1 else { return false }
            _ = try connection.run("""
                INSERT INTO rollout_events (bundle_id, at, action, actor, from_percent, to_percent, reason, purchases_json)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """, .text(next.bundleId), .integer(event.at), .text(event.action.rawValue), .text(event.actor.rawValue),
                .integer(Int64(event.fromPercent)), .integer(Int64(event.toPercent)), .text(event.reason),
                .text(try NotificationJSON.encode(event.purchases)))
            for webhook in webhooks { try insertWebhook(webhook, now: event.at, connection) }
            return true
        }
    }

    public func rolloutEvents(bundleId: String, limit: Int) throws(VerificationError) -> [RolloutEvent] {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("""
                SELECT at, action, actor, from_percent, to_percent, reason, purchases_json FROM rollout_events
                WHERE bundle_id = ? ORDER BY at DESC, seq DESC LIMIT ?
                """, .text(bundleId), .integer(Int64(max(0, limit)))) { (row) throws(VerificationError) in
                guard let action = RolloutEvent.Action(rawValue: try row.requiredText(1)),
                      let actor = RolloutEvent.Actor(rawValue: try row.requiredText(2)) else { throw SQLRow.corrupt }
                return RolloutEvent(at: try row.requiredInteger(0), action: action, actor: actor,
                                    fromPercent: Int(try row.requiredInteger(3)), toPercent: Int(try row.requiredInteger(4)),
                                    reason: try row.requiredText(5),
                                    purchases: try NotificationJSON.decode([String].self, try row.requiredText(6)))
            }
        }
    }

    public func rolloutRollbacks(bundleId: String) throws(VerificationError) -> Int {
        try database.withConnection { (connection) throws(VerificationError) in
            try connection.query("SELECT COUNT(*) FROM rollout_events WHERE bundle_id = ? AND action = ?",
                                 .text(bundleId), .text(RolloutEvent.Action.rolledBack.rawValue)) { (row) throws(VerificationError) in
                Int(try row.requiredInteger(0))
            }.first ?? 0
        }
    }
}
