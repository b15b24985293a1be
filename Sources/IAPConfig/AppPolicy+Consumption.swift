import IAPCore

/// Whether and how the gateway answers Apple's CONSUMPTION_REQUEST (Send Consumption Information)
/// for an app. Absent from the app file: requests are recorded but never answered. Every value the
/// gateway cannot know about the customer is sent as "undeclared" (0); only what the app's operator
/// states here is declared. Apple refuses an answer without the customer's consent, so the operator
/// must state that the app's terms obtain it (`customerConsented` must be true).
extension AppPolicy {
    public struct ConsumptionResponse: Sendable, Equatable {
        /// Apple's `deliveryStatus`: 0 delivered and working (the default).
        public var deliveryStatus: Int64 = 0
        /// Apple's `platform`: 1 Apple (the default), 0 undeclared, 2 non-Apple.
        public var platform: Int64 = 1
        /// Whether a free sample, trial or description of the content was provided before purchase.
        public var sampleContentProvided = false
        /// Apple's `refundPreference`: 0 undeclared (the default), 1 grant, 2 decline, 3 no preference.
        public var refundPreference: Int64 = 0

        static func decode(_ field: ConfigField) throws(VerificationError) -> ConsumptionResponse {
            let o = try field.object()
            var response = ConsumptionResponse()
            let consent = try o.required("customerConsented")
            guard try consent.bool() else {
                throw consent.fail("must be true: Apple refuses consumption data sent without the customer's consent")
            }
            if let f = o.optional("deliveryStatus") { response.deliveryStatus = try f.integer(in: 0...5) }
            if let f = o.optional("platform") { response.platform = try f.integer(in: 0...2) }
            if let f = o.optional("sampleContentProvided") { response.sampleContentProvided = try f.bool() }
            if let f = o.optional("refundPreference") { response.refundPreference = try f.integer(in: 0...3) }
            try o.finish()
            return response
        }
    }
}
