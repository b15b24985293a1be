import Foundation
import IAPGatewayClient
import TestPKI
import UpstreamHTTP
import XCTest

/// What a Linux backend does when its gateway's certificate comes from a private CA: URLSession
/// there trusts only the system's store, so it hands the client a transport that trusts the CA
/// (here libcurl with CURLOPT_CAINFO, through UpstreamHTTP).
struct PrivateCATransport: IAPGatewayTransport {
    let client: UpstreamHTTPClient

    init(caFile: String) throws {
        client = try UpstreamHTTPClient(configuration: UpstreamHTTPConfiguration(caBundlePath: caFile))
    }

    func send(_ request: IAPGatewayHTTPRequest) async throws -> IAPGatewayHTTPResponse {
        let answer = try await client.send(UpstreamRequest(method: request.method, url: request.url.absoluteString,
                                                           headers: request.headers.map { ($0.key, $0.value) },
                                                           body: request.body.map { Array($0) }))
        return IAPGatewayHTTPResponse(status: answer.status, headers: answer.headers, body: Data(answer.body))
    }
}

final class ClientHTTPSTests: XCTestCase {
    func testTheClientVerifiesOverTheGatewaysOwnHTTPS() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-client-tls-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let pki = try TestTLSFiles.make(in: directory)
        let gw = try await ClientDeployment.start(self) { $0.tlsFiles = (pki.certificateFile, pki.privateKeyFile) }
        XCTAssertTrue(gw.harness.gatewayURL.hasPrefix("https://"))

        let client = try gw.client(transport: try PrivateCATransport(caFile: pki.caFile))
        let bought = try gw.buy(owner: "device-erin")
        let verification = try await client.verifyReceipt(bought.receiptBase64, account: "erin")
        XCTAssertEqual(verification.verdict, .granted)
        let held = try await client.entitlements(account: "erin")
        XCTAssertEqual(held.map(\.grantsAccess), [true])

        // A transport that does not trust the CA never gets an answer.
        let untrusting = try gw.client()
        let refused = await refusal { () async throws(IAPGatewayError) in try await untrusting.entitlements(account: "erin") }
        XCTAssertEqual(refused?.kind, .transportFailed)
        XCTAssertNil(refused?.status)
    }
}
