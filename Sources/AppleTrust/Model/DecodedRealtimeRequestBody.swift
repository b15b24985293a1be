import Foundation
import IAPCore

/// What the App Store sends to the Retention Messaging realtime URL, decoded from its verified
/// `signedPayload` (Apple's DecodedRealtimeRequestBody): every member is required.
public struct DecodedRealtimeRequestBody: Sendable, Hashable {
    public let originalTransactionId: String
    public let appAppleId: Int64
    public let productId: String
    /// The customer's locale as Apple states it (`en-US`).
    public let userLocale: String
    /// Lowercased UUID, unique per request.
    public let requestIdentifier: String
    /// Milliseconds since 1970.
    public let signedDate: Int64
    public let environment: AppStoreEnvironment

    public init(_ payload: JSONValue) throws(VerificationError) {
        let f = try JSONFields(payload, context: "realtime request")
        originalTransactionId = try f.requiredString("originalTransactionId")
        appAppleId = try f.requiredInt64("appAppleId")
        productId = try f.requiredString("productId")
        userLocale = try f.requiredString("userLocale")
        let request = try f.requiredString("requestIdentifier")
        guard let uuid = UUID(uuidString: request) else {
            throw VerificationError(.invalidFieldType, "realtime request.requestIdentifier must be a UUID")
        }
        requestIdentifier = uuid.uuidString.lowercased()
        guard let signed = try f.date("signedDate") else { throw VerificationError(.missingField, "realtime request.signedDate is required") }
        signedDate = signed
        guard let environment: AppStoreEnvironment = try f.open("environment") else {
            throw VerificationError(.missingField, "realtime request.environment is required")
        }
        self.environment = environment
    }
}

extension SignedDataVerifier {
    /// A Retention Messaging realtime request: verified like every signed payload (pinned roots,
    /// chain at its signedDate, ES256), then held to the app's identity: its `appAppleId` (it names no
    /// bundle id, so the identity must know the app's Apple id) and an accepted environment; and it must be
    /// fresh. Apple signs a realtime request as the subscriber opens the page and waits about 700 ms
    /// for the answer (its performance test), never sending it again later, so its signedDate is
    /// held to the same clock-skew allowance backwards as every signedDate is forwards: an older
    /// request is a replay (Apple's library sets no bound; this one is stricter, never looser).
    public func verifyAndDecodeRealtimeRequest(_ jws: String) throws(VerificationError) -> DecodedRealtimeRequestBody {
        let (request, stated) = try verified(jws, as: .realtimeRequest, DecodedRealtimeRequestBody.init)
        try identity.check(stated)
        // `clockSkewMs` is at most `PayloadDates.maxMs`, so the subtraction cannot overflow.
        let nowMs = PayloadDates.milliseconds(now())
        guard request.signedDate >= nowMs - clockSkewMs else {
            throw VerificationError(.signedDateTooOld,
                                    "signedDate \(request.signedDate) is earlier than now (\(nowMs)) minus the allowed skew")
        }
        return request
    }
}
