#!/usr/bin/env python3
"""Gathers the raw figures Benchmarks/run.sh wrote into WORK, computes every ratio to its same-run
baseline, checks the issue's goals, and writes OUT.json and OUT.md (the table is also printed).
Usage: report.py WORK OUT COMMAND"""
import json
import os
import platform
import sys
from datetime import datetime, timezone

work, out, command = sys.argv[1], sys.argv[2], sys.argv[3]


def load(name):
    path = os.path.join(work, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


bench = load("bench.json") or {}
verify = load("verify.json") or {}
notif_sqlite = load("notif-sqlite.json") or {}
notif_pg = load("notif-postgres.json")
sqlite_base = load("sqlite-baseline.json") or {}
pg_base = load("pg-baseline.json")
peer = bench.get("python_peer") or {}
openssl = bench.get("openssl_speed_ecdsap256_verify_per_s")

rows = []  # (number, figure, value, unit, baseline label, baseline value, ratio, goal text, met)


def ratio(a, b):
    return a / b if a is not None and b else None


def row(number, figure, value, unit, baseline_label, baseline, r, goal="", met=None):
    rows.append({"benchmark": number, "figure": figure, "value": value, "unit": unit,
                 "baseline": baseline_label, "baseline_value": baseline, "ratio": r,
                 "goal": goal, "met": met})


warm, cold = bench.get("jws_warm_per_s"), bench.get("jws_cold_per_s")
r = ratio(warm, openssl)
row(1, "JWS verify, warm chain cache", warm, "/s", "openssl speed ecdsap256 verify (1 core)", openssl, r,
    "≥ 0.80", r is not None and r >= 0.8)
row(1, "JWS verify, cold (no chain cache)", cold, "/s", "openssl speed ecdsap256 verify (1 core)", openssl,
    ratio(cold, openssl))
py_jws = peer.get("jws_transaction_per_s")
r = ratio(warm, py_jws)
row(2, "JWS verify, warm (iapgw ÷ Apple's Python library)", warm, "/s",
    f"{peer.get('library', 'app-store-server-library')} verify", py_jws, r, "≥ 60×",
    None if r is None else r >= 60)
receipts = bench.get("receipt_parse_verify_per_s")
py_receipt = peer.get("receipt_extract_per_s")
row(3, f"receipt parse + PKCS#7 verify ({bench.get('receipt_records', '?')} records)", receipts, "/s",
    "Python ReceiptUtility transaction-id extraction (no verify)", py_receipt, ratio(receipts, py_receipt))
row(3, "receipt parse only", bench.get("receipt_parse_per_s"), "/s", "Python ReceiptUtility (no verify)", py_receipt,
    ratio(bench.get("receipt_parse_per_s"), py_receipt))
rps, v_openssl = verify.get("requests_per_s"), verify.get("openssl_speed_ecdsap256_verify_per_s")
r = ratio(rps, v_openssl)
row(4, f"POST /verify, 64 connections, {verify.get('cores', '?')} cores", rps, "req/s",
    "openssl speed ecdsap256 verify (1 core)", v_openssl, r, "≥ 1.0", None if r is None else r >= 1.0)
p50, p99, rss = verify.get("p50_ms"), verify.get("p99_ms"), verify.get("peak_rss_mb")
row(4, "POST /verify p50", p50, "ms", "", None, None)
row(4, "POST /verify p99", p99, "ms", "goal 10 ms", 10.0, ratio(p99, 10.0), "≤ 10 ms", None if p99 is None else p99 <= 10)
row(4, "POST /verify peak RSS (gateway + simulator)", rss, "MB", "goal 100 MB", 100.0, ratio(rss, 100.0), "≤ 100 MB",
    None if rss is None else rss <= 100)
acc = notif_sqlite.get("accepted_per_s")
row(5, "notifications accepted/s, SQLite (3 JWS + durable insert)", acc, "/s",
    "sqlite3 CLI single-row 4 KB inserts, WAL + synchronous=FULL", sqlite_base.get("per_s"),
    ratio(acc, sqlite_base.get("per_s")))
row(5, "inbox drained/s, SQLite", notif_sqlite.get("drained_per_s"), "/s",
    "sqlite3 CLI single-row inserts (as above)", sqlite_base.get("per_s"),
    ratio(notif_sqlite.get("drained_per_s"), sqlite_base.get("per_s")))
if notif_pg is None or "skipped" in (notif_pg or {}):
    reason = (notif_pg or {}).get("skipped", "PostgreSQL not available")
    row(5, f"notifications accepted/s, PostgreSQL: skipped ({reason})", None, "/s",
        "pgbench, 16 clients, single-row 4 KB inserts", (pg_base or {}).get("per_s"), None)
else:
    acc_pg = notif_pg.get("accepted_per_s")
    row(5, "notifications accepted/s, PostgreSQL (3 JWS + durable insert)", acc_pg, "/s",
        "pgbench, 16 clients, single-row 4 KB inserts", (pg_base or {}).get("per_s"),
        ratio(acc_pg, (pg_base or {}).get("per_s")))
    row(5, "inbox drained/s, PostgreSQL", notif_pg.get("drained_per_s"), "/s",
        "pgbench (as above)", (pg_base or {}).get("per_s"),
        ratio(notif_pg.get("drained_per_s"), (pg_base or {}).get("per_s")))

commit = open(os.path.join(work, "commit")).read().strip() if os.path.exists(os.path.join(work, "commit")) else "?"
when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def fmt(v, digits=0):
    if v is None:
        return "–"
    return f"{v:,.{digits}f}" if abs(v) >= 100 or digits else f"{v:.1f}"


lines = [f"# IAPGateway benchmarks, {when}", "",
         f"Command: `{command}` · commit {commit} · {os.cpu_count()} cores · {platform.machine()} · "
         f"seconds per measurement: {bench.get('seconds_per_measurement', '?')}", "",
         "| # | figure | value | baseline (same run) | ratio | goal | met |",
         "|---|---|---:|---|---:|---|---|"]
for x in rows:
    value = "–" if x["value"] is None else f"{fmt(x['value'], 2 if x['unit'] == 'ms' else 0)} {x['unit']}"
    base = x["baseline"] + (f": {fmt(x['baseline_value'])}" if x["baseline_value"] is not None else "")
    r = "–" if x["ratio"] is None else f"{x['ratio']:.2f}×" if x["ratio"] < 10 else f"{x['ratio']:.0f}×"
    met = {True: "yes", False: "**no**", None: ""}[x["met"]]
    lines.append(f"| {x['benchmark']} | {x['figure']} | {value} | {base} | {r} | {x['goal']} | {met} |")
markdown = "\n".join(lines) + "\n"

with open(out + ".json", "w") as f:
    json.dump({"when": when, "command": command, "commit": commit, "cores": os.cpu_count(), "figures": rows,
               "raw": {"bench": bench, "verify_load": verify, "notifications_sqlite": notif_sqlite,
                       "notifications_postgres": notif_pg, "sqlite_baseline": sqlite_base,
                       "pgbench_baseline": pg_base}}, f, indent=2)
with open(out + ".md", "w") as f:
    f.write(markdown)
print(markdown)
print(f"written: {out}.json, {out}.md")
