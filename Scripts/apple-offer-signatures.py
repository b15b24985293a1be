#!/usr/bin/env python3
"""Test tool, not part of the product: signs an offer with Apple's Python App Store Server Library
(PyPI app-store-server-library) so tests can cross-check what the gateway signs.

Reads one JSON object on stdin:
  {"kind": "v1"|"v2"|"introductoryOfferEligibility", "privateKey": PEM, "keyId", "issuerId", "bundleId",
   "productId", "offerId"?, "appAccountToken"?, "nonce"?, "timestamp"?, "transactionId"?, "allow"?}
Prints {"signature": ...}: v1 the base64 DER signature, otherwise the compact JWS.
Exits 3 when the library is not importable (the caller skips), non-zero on any other failure.
"""
import json
import sys
import uuid

try:
    from appstoreserverlibrary.promotional_offer import PromotionalOfferSignatureCreator
    from appstoreserverlibrary.jws_signature_creator import (IntroductoryOfferEligibilitySignatureCreator,
                                                             PromotionalOfferV2SignatureCreator)
except ImportError as error:
    print(f"app-store-server-library not importable: {error}", file=sys.stderr)
    sys.exit(3)

q = json.load(sys.stdin)
key = q["privateKey"].encode()
if q["kind"] == "v1":
    creator = PromotionalOfferSignatureCreator(key, q["keyId"], q["bundleId"])
    signature = creator.create_signature(q["productId"], q["offerId"], q["appAccountToken"], uuid.UUID(q["nonce"]),
                                         q["timestamp"])
elif q["kind"] == "v2":
    creator = PromotionalOfferV2SignatureCreator(key, q["keyId"], q["issuerId"], q["bundleId"])
    signature = creator.create_signature(q["productId"], q["offerId"], q.get("transactionId"))
elif q["kind"] == "introductoryOfferEligibility":
    creator = IntroductoryOfferEligibilitySignatureCreator(key, q["keyId"], q["issuerId"], q["bundleId"])
    signature = creator.create_signature(q["productId"], q["allow"], q["transactionId"])
else:
    sys.exit(f"unknown kind {q['kind']}")
print(json.dumps({"signature": signature}))
