import IAPCore

/// The paid-app-goes-free migration: everyone who bought the app before it went free keeps what
/// they paid for. Apple's app-level facts (an AppTransaction's, or a legacy receipt's
/// `original_application_version` / `original_purchase_date`) decide; the listed products are
/// granted to whoever the facts show bought the app before the cut. Every criterion set must hold,
/// and a fact that is absent or unreadable grants nothing (fail closed).
extension AppPolicy {
    public struct Grandfathering: Sendable, Equatable {
        /// Granted to grandfathered buyers; each must be in the product catalog.
        public var productIds: [String]
        /// The first version (iOS: `CFBundleVersion`, as Apple states `originalApplicationVersion`)
        /// that was free: buyers who first installed an earlier one are grandfathered.
        public var beforeOriginalApplicationVersion: String?
        /// Milliseconds since 1970: buyers whose original purchase is earlier are grandfathered.
        public var beforeOriginalPurchaseDate: Int64?

        public init(productIds: [String], beforeOriginalApplicationVersion: String? = nil,
                    beforeOriginalPurchaseDate: Int64? = nil) {
            self.productIds = productIds
            self.beforeOriginalApplicationVersion = beforeOriginalApplicationVersion
            self.beforeOriginalPurchaseDate = beforeOriginalPurchaseDate
        }

        /// Whether these app-level facts grandfather their buyer.
        public func grandfathers(_ app: CanonicalAppTransaction) -> Bool {
            if let cut = beforeOriginalApplicationVersion {
                guard let version = app.originalApplicationVersion,
                      let order = Self.compareVersions(version, cut), order < 0 else { return false }
            }
            if let cut = beforeOriginalPurchaseDate {
                guard let date = app.originalPurchaseDate, date < cut else { return false }
            }
            return true
        }

        /// Dot-separated decimal versions compared component by component, a missing component
        /// counting as 0 ("1.2" == "1.2.0"); nil when either is not such a version.
        public static func compareVersions(_ a: String, _ b: String) -> Int? {
            func parts(_ v: String) -> [Int]? {
                let items = v.split(separator: ".", omittingEmptySubsequences: false)
                guard !items.isEmpty, items.count <= 8 else { return nil }
                var numbers: [Int] = []
                for item in items {
                    guard (1...9).contains(item.utf8.count), item.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                          let n = Int(item) else { return nil }
                    numbers.append(n)
                }
                return numbers
            }
            guard let x = parts(a), let y = parts(b) else { return nil }
            for i in 0..<max(x.count, y.count) {
                let l = i < x.count ? x[i] : 0, r = i < y.count ? y[i] : 0
                if l != r { return l < r ? -1 : 1 }
            }
            return 0
        }

        static func decode(_ field: ConfigField, catalog: [String: Product]) throws(VerificationError) -> Grandfathering {
            let o = try field.object()
            let productsField = try o.required("productIds")
            var products: [String] = []
            for item in try productsField.array() {
                let id = try item.nonEmptyString()
                guard catalog[id] != nil else { throw item.fail("\"\(id)\" is not in the product catalog") }
                guard !products.contains(id) else { throw item.fail("listed twice") }
                products.append(id)
            }
            guard !products.isEmpty else { throw productsField.fail("must list at least one product") }
            var rule = Grandfathering(productIds: products)
            if let f = o.optional("beforeOriginalApplicationVersion") {
                let version = try f.nonEmptyString()
                guard compareVersions(version, version) != nil else { throw f.fail("must be a dot-separated decimal version") }
                rule.beforeOriginalApplicationVersion = version
            }
            if let f = o.optional("beforeOriginalPurchaseDate") { rule.beforeOriginalPurchaseDate = try f.integer(in: 1...Int64.max) }
            guard rule.beforeOriginalApplicationVersion != nil || rule.beforeOriginalPurchaseDate != nil else {
                throw field.fail("needs beforeOriginalApplicationVersion and/or beforeOriginalPurchaseDate")
            }
            try o.finish()
            return rule
        }
    }
}
