#!/usr/bin/env python3
"""Peer benchmark: Apple's official Python App Store Server Library.

Not part of the product. It measures Apple's `app-store-server-library`
(PyPI) on the same real Apple-signed vectors our Swift code uses, so the Swift
benchmark can print ratios. Install the library first with
`bash Benchmarks/setup_python_peer.sh`, then run this file with the python it
prints (the venv's, or python3 with the PYTHONPATH it prints).

Usage: peer_python.py [--vectors DIR] [--seconds S]
  DIR defaults to <repo>/../shared/testdata/apple-real, S to 3 (per measurement).

Single process, single thread. Prints ONE JSON object on stdout. A measurement
the library refuses gets null and an entry in "notes"; any other failure
(missing file, library not importable, a vector decoding to the wrong facts)
exits non-zero with a message on stderr.

What is measured (read from the library's own source, 3.1.2):
- SignedDataVerifier(enable_online_checks=False) validates the x5c chain at the
  payload's signedDate, not at "now": `_decode_signed_object` computes
  `effective_date = time.time() if enable_online_checks or signed_date is None
  else int(signed_date) // 1000` and `_ChainVerifier` calls
  `X509Store.set_time(effective_date)`. That is why the production
  notification, whose leaf expired 2025-10-11, still verifies offline.
- No caching when online checks are off: `_ChainVerifier.verify_chain` only
  consults/fills its 15-minute public-key cache when perform_online_checks is
  true. So every call here does the full work: two unverified JWT decodes of
  header/payload, building an X509Store (re-parsing the root DER each time,
  X509_STRICT), parsing leaf + intermediate, OpenSSL chain verification,
  the two Apple marker OID checks, exporting the leaf key to PEM, an ES256
  signature check via PyJWT, and the cattrs structuring of the payload into
  the model class. The x5c's third (root) certificate is ignored; the
  configured root is the anchor.
- ReceiptUtility.extract_transaction_id_from_app_receipt verifies NO signature
  and no certificate (its docstring: "*NO validation* is performed"). It
  base64-decodes, decodes the whole PKCS#7 (certificates included) with the
  pure-Python `asn1` package, decodes the payload SET, and returns the transaction id (1703, or 1705 if
  that comes first) of the FIRST in-app record only, so of the 187 records in
  receipt-sandbox-legacy.b64 only one record's contents are decoded (the outer
  payload SET, which holds all 187 records as octet strings, is decoded whole).
"""

import argparse
import base64
import json
import os
import platform
import sys
import time


def die(msg: str) -> "NoReturn":  # type: ignore[name-defined]
    print(f"peer_python: {msg}", file=sys.stderr)
    sys.exit(1)


try:
    from importlib.metadata import version as pkg_version

    from appstoreserverlibrary.models.Environment import Environment
    from appstoreserverlibrary.receipt_utility import ReceiptUtility
    from appstoreserverlibrary.signed_data_verifier import (
        SignedDataVerifier,
        VerificationException,
    )
except Exception as e:  # noqa: BLE001
    die(f"cannot import app-store-server-library ({e!r}); run Benchmarks/setup_python_peer.sh "
        "and use the python it prints")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_VECTORS = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "testdata", "apple-real"))

EXPECTED_TRANSACTION_ID = "2000000847061981"
EXPECTED_NOTIFICATION_UUID = "2e2a6ce0-ec9f-4037-b1bf-618af85527bd"


def read_bytes(directory: str, name: str) -> bytes:
    path = os.path.join(directory, name)
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        die(f"cannot read vector {path}: {e}")


def read_text(directory: str, name: str) -> str:
    return read_bytes(directory, name).decode("ascii").strip()


def rate(fn, seconds: float) -> float:
    """Calls fn() repeatedly for about `seconds`; returns calls per second.

    The clock is read once per batch; the batch grows until one batch takes
    about 1/20 of the budget, so timing overhead stays negligible.
    """
    fn()  # warm-up (the caller already checked a first call's result)
    count = 0
    batch = 1
    perf = time.perf_counter
    start = perf()
    deadline = start + seconds
    while True:
        t0 = perf()
        for _ in range(batch):
            fn()
        t1 = perf()
        count += batch
        if t1 >= deadline:
            break
        if (t1 - t0) < seconds / 20:
            batch *= 2
    return count / (t1 - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vectors", default=DEFAULT_VECTORS, help="directory of the apple-real vectors")
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement (default 3)")
    args = ap.parse_args()
    if not args.seconds > 0:
        die("--seconds must be > 0")
    if not os.path.isdir(args.vectors):
        die(f"vectors directory not found: {args.vectors}")

    root_g3 = read_bytes(args.vectors, "AppleRootCA-G3.cer")
    transaction_jws = read_text(args.vectors, "sandbox-consumable-transaction.jws")
    notification_jws = read_text(args.vectors, "production-test-notification.jws")
    receipt_b64 = "".join(read_text(args.vectors, "receipt-sandbox-legacy.b64").split())
    try:
        base64.b64decode(receipt_b64, validate=True)
    except ValueError as e:
        die(f"receipt-sandbox-legacy.b64 is not valid base64: {e}")

    notes = []
    out = {
        "python": platform.python_version(),
        "library": f"app-store-server-library {pkg_version('app-store-server-library')}",
        "jws_transaction_per_s": None,
        "jws_notification_per_s": None,
        "receipt_extract_per_s": None,
        "seconds": args.seconds,
    }

    # a. JWS signed transaction (Sandbox, chain checked at signedDate).
    tx_verifier = SignedDataVerifier(
        root_certificates=[root_g3],
        enable_online_checks=False,
        environment=Environment.SANDBOX,
        bundle_id="com.goodheartapp",
        app_apple_id=None,
    )
    try:
        tx = tx_verifier.verify_and_decode_signed_transaction(transaction_jws)
    except VerificationException as e:
        tx = None
        notes.append(f"jws_transaction: library refused sandbox-consumable-transaction.jws: {e} "
                     f"(cause: {e.__cause__!r})")
    if tx is not None:
        if str(tx.transactionId) != EXPECTED_TRANSACTION_ID:
            die(f"transaction decoded with transactionId {tx.transactionId!r}, expected {EXPECTED_TRANSACTION_ID}")
        out["jws_transaction_per_s"] = round(
            rate(lambda: tx_verifier.verify_and_decode_signed_transaction(transaction_jws), args.seconds), 1)

    # a'. JWS V2 notification (Production; leaf expired 2025-10-11, valid at signedDate).
    nt_verifier = SignedDataVerifier(
        root_certificates=[root_g3],
        enable_online_checks=False,
        environment=Environment.PRODUCTION,
        bundle_id="com.nineton.taller",
        app_apple_id=6450284872,
    )
    try:
        nt = nt_verifier.verify_and_decode_notification(notification_jws)
    except VerificationException as e:
        nt = None
        notes.append(f"jws_notification: library refused production-test-notification.jws: {e} "
                     f"(cause: {e.__cause__!r})")
    if nt is not None:
        if str(nt.notificationUUID) != EXPECTED_NOTIFICATION_UUID:
            die(f"notification decoded with notificationUUID {nt.notificationUUID!r}, "
                f"expected {EXPECTED_NOTIFICATION_UUID}")
        out["jws_notification_per_s"] = round(
            rate(lambda: nt_verifier.verify_and_decode_notification(notification_jws), args.seconds), 1)

    # b. Receipt transaction-id extraction (NO signature or certificate check at all).
    util = ReceiptUtility()
    try:
        tid = util.extract_transaction_id_from_app_receipt(receipt_b64)
    except ValueError as e:
        tid = None
        notes.append(f"receipt_extract: library refused receipt-sandbox-legacy.b64: {e!r}")
    else:
        if not tid:
            tid = None
            notes.append("receipt_extract: library found no transaction id in receipt-sandbox-legacy.b64")
    if tid is not None:
        out["receipt_extract_transaction_id"] = tid
        out["receipt_extract_per_s"] = round(
            rate(lambda: util.extract_transaction_id_from_app_receipt(receipt_b64), args.seconds), 1)
        notes.append("receipt_extract verifies no signature and decodes only the first in-app record "
                     "(returns its transaction id); it is not comparable to full receipt validation")

    notes.append("JWS: online checks off, chain validated at the payload's signedDate; "
                 "no public-key cache in this mode, every call verifies the full chain")
    out["notes"] = notes
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
