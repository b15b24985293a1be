// libFuzzer target: bytes as the body Apple posts to /v1/notifications/{bundleId}, through the
// gateway's own NotificationDecoder (V2 `{"signedPayload"}` → JWS → payload models → mapping; V1
// legacy JSON → shared-secret, bundle, environment and receipt checks), and as a request path
// through HTTPRequest's segment decoding. Any outcome but a VerificationError or a value is a bug.
//
// Run: Scripts/fuzz.sh 60 FuzzNotification   (seeds: a real V2 body and a V1 body with the right secret)
import Adapters
import Foundation
import Gateway
import HTTPServer
import IAPConfig
import IAPCore
import IAPMapping
import UpstreamHTTP

/// The shared secret V1 bodies must carry; the seed V1 body has it, so the fuzzer starts past that check.
let sharedSecret = "fuzz-shared-secret-0123456789abcdef"

/// The real-vector app (com.nineton.taller), its roots read from `IAPGW_APPLE_REAL` or ../shared.
let setup: (NotificationDecoder, AppPolicy) = {
    let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let real = ProcessInfo.processInfo.environment["IAPGW_APPLE_REAL"]
        ?? here.deletingLastPathComponent().appendingPathComponent("shared/testdata/apple-real").path
    let environment = ["FUZZ_SHARED_SECRET": sharedSecret, "FUZZ_API_KEY": "fuzz-api-key-0123456789abcdef"]
    let xml = """
        <app bundleId="com.nineton.taller">
            <appAppleId type="integer">6450284872</appAppleId>
            <allowedEnvironments type="array"><item>Production</item><item>Sandbox</item></allowedEnvironments>
            <trustRoots>
                <jws type="array"><item>\(real)/AppleRootCA-G3.cer</item></jws>
                <receipts type="array"><item>\(real)/AppleIncRootCertificate.cer</item></receipts>
            </trustRoots>
            <sharedSecret><env>FUZZ_SHARED_SECRET</env></sharedSecret>
            <serverAPI><issuerId>57246542-96fe-1a63-e053-0824d011072a</issuerId><keyId>FUZZKEY001</keyId><privateKey><env>FUZZ_UNUSED_KEY</env></privateKey></serverAPI>
            <productCatalog type="array"></productCatalog>
            <routing><receipt>legacy</receipt><transactionId>serverAPI</transactionId><signedTransaction>serverAPI</signedTransaction></routing>
            <noncePolicy><requiredForReceipts type="bool">false</requiredForReceipts><ttlSeconds type="integer">300</ttlSeconds></noncePolicy>
            <familySharingPolicy>allow</familySharingPolicy>
            <gracePeriodPolicy><grantDuringGracePeriod type="bool">true</grantDuringGracePeriod><grantDuringBillingRetry type="bool">false</grantDuringBillingRetry></gracePeriodPolicy>
            <onlineChecks type="bool">false</onlineChecks>
            <localOnlyJWS type="bool">true</localOnlyJWS>
            <apiKey><env>FUZZ_API_KEY</env></apiKey>
        </app>
        """
    do {
        let policy = try ConfigLoader.decodeAppPolicy(Data(xml.utf8), format: .xml, displayName: "fuzz.xml",
                                                      baseDirectory: URL(fileURLWithPath: real))
        let mappings = try MappingSet.load(directory: here.appendingPathComponent("Mappings"))
        // V2 bodies are read by the adapter that owns them, as the gateway's assembly registers it.
        guard let mapping = mappings.latest(source: "serverAPI") else { fatalError("FuzzNotification: no serverAPI mapping") }
        let verifiers = AppVerifiers()
        var options = ServerAPIAdapter.Options()
        options.verifiers = verifiers
        let adapter = ServerAPIAdapter(upstream: try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration()),
                                       baseURLs: GatewayConfig(appsDirectory: URL(fileURLWithPath: real)).upstream.serverAPI,
                                       normalizer: try ServerAPINormalizer(mapping), options: options)
        return (NotificationDecoder(signed: adapter, environment: environment, verifiers: verifiers), policy)
    } catch {
        fatalError("FuzzNotification setup: \(error)")
    }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let (decoder, policy) = setup
    _ = try? decoder.decode(body: bytes, app: policy)
    let path = String(decoding: bytes.prefix(2048), as: UTF8.self)
    _ = HTTPRequest(method: "POST", path: path).pathSegments
    return 0
}
