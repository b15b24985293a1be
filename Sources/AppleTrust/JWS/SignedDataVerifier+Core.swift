import Foundation
import IAPCore

extension SignedDataVerifier {
    /// The shared path for every kind: returns the payload only once its signature verifies under a
    /// leaf that chains to a pinned root at the payload's own date.
    ///
    /// Order: (1) shape and header; (2) the chain's date-independent checks (pinned root, Apple
    /// OIDs, every certificate signature), or a cache hit for exactly these header bytes, which
    /// implies them; (3) the ES256 signature under the leaf key (or the memo of signatures that
    /// verified under it, which gives the same verdict); only then (4) the payload is
    /// parsed (its base64 shape is checked just before the signature), and its date picks the time the chain must be valid at; (5) the clock
    /// checks (signedDate, then the registered JWT claims, `RegisteredClaims`) and online checks. Nothing the payload says is read before it is proven to be Apple's, so a
    /// foreign token is UNTRUSTED_ROOT and tampering is INVALID_SIGNATURE whatever the payload is.
    func verifiedPayload(_ jws: String, dateField: String, expected: PayloadKind?) throws(VerificationError) -> JSONValue {
        var text = jws
        let result: Result<JSONValue, VerificationError> = text.withUTF8 { bytes in
            do throws(VerificationError) {
                return .success(try verifiedPayload(bytes: bytes, dateField: dateField, expected: expected))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private func verifiedPayload(bytes: UnsafeBufferPointer<UInt8>, dateField: String, expected: PayloadKind?) throws(VerificationError) -> JSONValue {
        guard bytes.count <= maxInputBytes else {
            throw VerificationError(.inputTooLarge, "JWS of \(bytes.count) bytes exceeds \(maxInputBytes)")
        }
        let segments = try Self.split(bytes)
        let header = UnsafeBufferPointer(rebasing: bytes[segments.header])
        let signingInput = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[segments.header.lowerBound..<segments.payload.upperBound])

        let cached = cache.lookup(header)
        var certs: [X509Certificate]? = nil
        let leafKey: ECPublicKey
        let window: ChainValidity
        let headerHash: SHA256Prefix
        if let cached {
            leafKey = cached.leafKey
            window = cached.validity
            headerHash = cached.headerHash
        } else {
            let decoded = try Self.decodeHeader(header, reusing: knownCertificate)
            window = try policy.verifyJWSChain(decoded)
            guard let key = decoded[0].publicKey, key.isNamedP256 else {
                throw VerificationError(.invalidSignature, "the leaf key is not on the named curve P-256")
            }
            decoded[1].der.withUnsafeBytes { verifiedIntermediates.store($0.bindMemory(to: UInt8.self), decoded[1]) }
            certs = decoded
            leafKey = key
            headerHash = SHA256Prefix(UnsafeRawBufferPointer(header))
        }
        // Base64 shape of both segments before the signature: a non-canonical encoding is refused
        // as such even where its bytes happen to verify.
        let payloadBytes = try Base64URL.decode(UnsafeBufferPointer(rebasing: bytes[segments.payload]))
        let signature = try Base64URL.decode(UnsafeBufferPointer(rebasing: bytes[segments.signature]))
        // The digest is finished from the header's saved state on a hit and a miss alike (one
        // path): the signing input starts with the header, whose whole blocks the state holds.
        // A (digest, signature) pair that already verified under this entry's leaf key is not
        // verified again: the verdict is a function of exactly (key, digest, signature), so the
        // memo gives the verify's own answer (`VerifiedSignatureMemo`); a new entry starts empty.
        let memo = cached?.verifiedSignatures ?? VerifiedSignatureMemo(capacity: signatureMemoCapacity)
        let signatureVerifies = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { digest in
            guard headerHash.finish(signingInput, into: digest.baseAddress!) else { return false }
            let pair = VerifiedSignatureMemo.Pair(digest: UnsafeBufferPointer(digest), signature: signature)
            if let pair, memo.contains(pair) {
                signatureMemoHitCount.add(1, ordering: .relaxed)
                return true
            }
            guard leafKey.verifyES256(signature: signature, sha256: UnsafeBufferPointer(digest)) else { return false }
            if let pair { memo.insertVerified(pair) }
            return true
        }
        guard signatureVerifies else {
            throw VerificationError(.invalidSignature, "the ES256 signature does not verify")
        }

        let payload = try StrictJSON(maxBytes: maxInputBytes).parse(payloadBytes)
        guard let signedMs = try JSONFields(payload, context: "payload").date(dateField) else {
            // Another kind of payload (an app transaction has no signedDate) is named as such.
            if let expected, Self.kind(of: payload) != expected { try requireKind(payload, expected) }
            throw VerificationError(.missingField, "payload.\(dateField) is required")
        }
        try ValidityTime(PayloadDates.floorSeconds(signedMs)).check(window)
        var verified = cached ?? VerifiedChain(leafKey: leafKey, validity: window, revocationCheckedAt: nil, headerHash: headerHash,
                                                verifiedSignatures: memo)

        let nowMs = PayloadDates.milliseconds(now())
        let latest = nowMs.addingReportingOverflow(clockSkewMs)
        guard latest.overflow || signedMs <= latest.partialValue else {
            throw VerificationError(.signedDateInFuture, "\(dateField) \(signedMs) is later than now (\(nowMs)) plus the allowed skew")
        }
        try RegisteredClaims.check(payload, nowMs: nowMs)
        if enableOnlineChecks {
            let nowSecond = PayloadDates.floorSeconds(nowMs)
            try ValidityTime(nowSecond).check(verified.validity)
            if verified.revocationCheckedAt.map({ nowSecond - $0 > revocationRecheckSeconds || $0 > nowSecond }) ?? true {
                if certs == nil { certs = try Self.decodeHeader(header, reusing: knownCertificate) }
                try revocationVerdict(header: header, chain: certs!)
                verified.revocationCheckedAt = nowSecond
                cache.store(header, verified)
            }
        } else if cached == nil {
            cache.store(header, verified)
        }
        return payload
    }

    struct Segments { var header: Range<Int>; var payload: Range<Int>; var signature: Range<Int> }

    static func split(_ bytes: UnsafeBufferPointer<UInt8>) throws(VerificationError) -> Segments {
        // memchr: the segments are ~5 KiB and a byte-by-byte Swift loop showed up in profiles.
        func dot(from start: Int) -> Int? {
            guard start < bytes.count, let base = bytes.baseAddress,
                  let hit = memchr(base + start, Int32(UInt8(ascii: ".")), bytes.count - start) else { return nil }
            return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
        }
        guard let first = dot(from: 0), let second = dot(from: first + 1), dot(from: second + 1) == nil,
              first > 0, second > first + 1, second < bytes.count - 1 else {
            throw VerificationError(.malformedJWS, "a compact JWS is exactly three non-empty segments")
        }
        return Segments(header: 0..<first, payload: (first + 1)..<second, signature: (second + 1)..<bytes.count)
    }

    /// A certificate already parsed with exactly these DER bytes: a pinned root, or the
    /// intermediate of a chain this verifier verified. Reused, never trusted for being known: the
    /// chain is still built and every signature in it checked. OpenSSL 3.0's d2i_X509 costs more
    /// than an ES256 verify (it sets up a provider decoder for the public key on every call), and a
    /// new leaf comes under the same WWDR intermediate and root.
    func knownCertificate(_ der: UnsafeBufferPointer<UInt8>) -> X509Certificate? {
        for root in policy.roots where root.der.count == der.count {
            let same = root.der.withUnsafeBytes { memcmp($0.baseAddress!, der.baseAddress!, der.count) == 0 }
            if same { return root }
        }
        return verifiedIntermediates.lookup(der)
    }

    /// The protected header: `alg` must be ES256 and `x5c` exactly three DER certificates, each
    /// parsed unless `reusing` has it.
    static func decodeHeader(_ segment: UnsafeBufferPointer<UInt8>,
                             reusing known: (UnsafeBufferPointer<UInt8>) -> X509Certificate? = { _ in nil })
        throws(VerificationError) -> [X509Certificate] {
        let json = try StrictJSON(maxBytes: defaultMaxInputBytes, maxDepth: 4).parse(try Base64URL.decode(segment))
        let fields = try JSONFields(json, context: "header")
        guard let alg = try fields.string("alg") else { throw VerificationError(.unsupportedAlgorithm, "header has no alg") }
        guard alg == "ES256" else { throw VerificationError(.unsupportedAlgorithm, "alg \"\(ClientExcerpt.of(alg, limit: 32))\" is not ES256") }
        if fields.object["crit"] != nil {
            throw VerificationError(.malformedJWS, "header has critical extensions this verifier does not know")
        }
        guard let x5c = try fields.array("x5c") else { throw VerificationError(.invalidChainLength, "header has no x5c") }
        guard x5c.count == 3 else {
            throw VerificationError(.invalidChainLength, "x5c holds \(x5c.count) certificates, expected 3")
        }
        var certs: [X509Certificate] = []
        for entry in x5c {
            guard let b64 = entry.stringValue else { throw VerificationError(.invalidFieldType, "header.x5c must hold strings") }
            let der = try Base64URL.decodeStandardPadded(b64)
            if let reused = der.withUnsafeBufferPointer(known) {
                certs.append(reused)
            } else {
                certs.append(try X509Certificate(der: Data(der)))
            }
        }
        return certs
    }
}
