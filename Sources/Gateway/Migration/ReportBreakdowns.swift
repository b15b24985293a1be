import IAPCore

/// The report's tallies beside the verdict: comparisons per product, environment and app version,
/// and path failures by class.
extension MigrationReport {
    static func breakdowns(_ comparisons: [PurchaseComparison]) -> [Breakdown] {
        var table: [String: Breakdown] = [:]
        for c in comparisons {
            var keys = (c.productIds.isEmpty ? ["(none)"] : c.productIds).map { ("product", $0) }
            keys.append(("environment", c.environment ?? "(unknown)"))
            if let v = c.appVersion { keys.append(("appVersion", v)) }
            for (dimension, value) in keys {
                var b = table["\(dimension)\u{0}\(value)"] ?? Breakdown(dimension: dimension, value: value)
                b.comparisons += 1
                if c.agreed { b.agreed += 1 }
                if !c.differences.isEmpty { b.withFindings += 1 }
                if failed(c) { b.failed += 1 }
                table["\(dimension)\u{0}\(value)"] = b
            }
        }
        let order = ["product", "environment", "appVersion"]
        return table.values.sorted { (order.firstIndex(of: $0.dimension)!, $0.value) < (order.firstIndex(of: $1.dimension)!, $1.value) }
    }

    static func failureClasses(_ comparisons: [PurchaseComparison], explained: [String: String]) -> [FailureClass] {
        var classes: [String: FailureClass] = [:]
        var order: [String] = []
        for c in comparisons {
            for (path, code) in [("verifyReceipt", c.legacyError), ("serverAPI", c.serverAPIError)] {
                guard let code else { continue }
                for productId in c.productIds.isEmpty ? [nil] : c.productIds.map(Optional.some) {
                    let key = "\(code)\u{0}\(path)\u{0}\(productId ?? "")"
                    if var f = classes[key] {
                        f.count += 1
                        f.lastSeen = c.comparedAt
                        classes[key] = f
                    } else {
                        order.append(key)
                        classes[key] = FailureClass(code: code, path: path, productId: productId, count: 1,
                                                    firstSeen: c.comparedAt, lastSeen: c.comparedAt, sampleComparisonId: c.id,
                                                    sampleTransactionId: c.purchases.first?.originalTransactionId,
                                                    sampleAccount: c.account, explanation: explained[code])
                    }
                }
            }
        }
        return order.map { classes[$0]! }.sorted { ($1.count, $0.code, $0.path) < ($0.count, $1.code, $1.path) }
    }
}
