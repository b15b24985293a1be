#!/usr/bin/env python3
"""What the slowest requests of a paced run waited on (Benchmarks/tail-profile.sh runs it).

Lines up, on CLOCK_MONOTONIC, every request of `iapgw-dev pace --csv` (due, sent, done, lag) with
the gateway's writer trace (IAPGW_WRITER_TRACE: batches, commits, checkpoint passes), the writer's
fdatasync/fsync calls and the scheduler (`perf record -a -k CLOCK_MONOTONIC` of sched_switch and
sched_wakeup, read through `perf sched timehist` and `perf script`), then splits the latency of the
requests at or above p99 (and, for contrast, of the median band p45-p55) into: waiting for a free
connection, the generator's own lag, send -> its batch taken by the writer (parse, verify, and the
queue behind the batch committing), its batch's statements, its COMMIT (of which fdatasync), and
answer -> response read; beside how long, during the request, a gateway thread was runnable but
off-CPU (run-queue delay), the generator was, and a checkpoint pass ran.

A request's batch is inferred: the last batch answered between its send and its response (calls
are answered in batch order, a response follows its answer within microseconds unless the
answering thread waits for a CPU, which the run-queue column shows).

  tail_attribution.py DIR NAME   (reads DIR/NAME.csv, NAME.json, NAME.timehist, NAME.syscalls,
                                  NAME.tids (the gateway's threads) and writer.trace; prints the attribution)
"""
import bisect
import csv
import json
import re
import sys
from collections import defaultdict


def pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    rank = max(1, min(len(values), int(-(-p / 100 * len(values) // 1))))
    return values[rank - 1]


def union_overlap(intervals, lo, hi):
    """Length of [lo, hi] covered by the union of sorted, possibly overlapping intervals (starts list + list)."""
    starts, spans = intervals
    i = bisect.bisect_left(starts, lo - 200_000_000)  # no wait or commit lasts 200 ms here
    covered, reach = 0, lo
    for start, end in spans[i:]:
        if start >= hi:
            break
        a, b = max(start, reach), min(end, hi)
        if b > a:
            covered += b - a
            reach = b
    return covered


def indexed(spans):
    spans.sort()
    return ([s for s, _ in spans], spans)


def main(directory, name):
    summary = json.load(open(f"{directory}/{name}.json"))
    t0 = int(summary["t0_monotonic_ns"])
    requests = []
    for row in csv.DictReader(open(f"{directory}/{name}.csv")):
        if not row["done_ms"] or row["failure"]:
            continue
        ns = lambda key: t0 + int(round(float(row[key]) * 1e6))
        requests.append({"due": ns("due_ms"), "sent": ns("sent_ms"), "done": ns("done_ms"),
                         "lag": int(round(float(row["lag_ms"] or 0) * 1e6))})
    start, end = min(r["due"] for r in requests), max(r["done"] for r in requests)

    batches, commits, checkpoints = [], [], []
    for line in open(f"{directory}/writer.trace"):
        kind, *fields = line.split()
        fields = list(map(int, fields))
        if kind == "batch" and start <= fields[2] <= end:
            batches.append(fields)  # oldest queued, taken, answered, calls
        elif kind == "commit" and start <= fields[2] <= end:
            commits.append(fields)  # begin, commit start, commit end, calls
        elif kind == "checkpoint" and start <= fields[1] <= end:
            checkpoints.append(fields)  # start, end, wal pages, copied pages
    batches.sort(key=lambda b: b[2])
    commits.sort(key=lambda c: c[2])
    answered = [b[2] for b in batches]
    commit_ends = [c[2] for c in commits]

    gateway_tids = {}
    for line in open(f"{directory}/{name}.tids"):
        tid, _, comm = line.strip().partition(" ")
        gateway_tids[int(tid)] = comm

    # fdatasync / fsync of the gateway's threads: (start, end, tid).
    syncs, entered = [], {}
    pattern = re.compile(r"^\s*(\d+)\s+(\d+\.\d+):\s+syscalls:sys_(enter|exit)_(fdatasync|fsync)")
    for line in open(f"{directory}/{name}.syscalls"):
        m = pattern.match(line)
        if not m or int(m.group(1)) not in gateway_tids:
            continue
        tid, t = int(m.group(1)), int(round(float(m.group(2)) * 1e9))
        if m.group(3) == "enter":
            entered[tid] = (t, m.group(4))
        elif tid in entered:
            began, call = entered.pop(tid)
            syncs.append((began, t, tid, call))
    sync_spans = indexed([(s, e) for s, e, _, _ in syncs])

    # The disk's own time: each block write from issue to completion, paired by sector. Flushes
    # carry no sector and are only counted (pairing them in order gave figures no sync could have).
    block = re.compile(r"^\s*\d+\s+(\d+\.\d+):\s+block:block_rq_(issue|complete):\s+(\S+)\s+(\S+)\s+(?:\d+\s+)?\(\)\s+(\d+)")
    issued, flushes_issued, device = {}, [], {"write": []}
    for line in open(f"{directory}/{name}.syscalls"):
        m = block.match(line)
        if not m:
            continue
        t, kind, rwbs, sector = int(round(float(m.group(1)) * 1e9)), m.group(2), m.group(4), m.group(5)
        if not start <= t <= end:
            continue
        if rwbs.startswith("F") and rwbs.rstrip("FS") == "":
            if kind == "issue":
                flushes_issued.append(t)
        elif "W" in rwbs:
            key = (m.group(3), sector)
            if kind == "issue":
                issued[key] = t
            elif key in issued:
                device["write"].append((t - issued.pop(key)) / 1e6)

    # Run-queue delay: per switch-out line, [time - run - sch_delay, time - run] the task was runnable.
    gateway_waits, pacer_waits, storage_waits, running = [], [], [], defaultdict(list)
    wait_by_thread = defaultdict(int)
    line_pattern = re.compile(r"^\s*(\d+\.\d+)\s+\[(\d+)\]\s+(.*?)\[(\d+)(?:/\d+)?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
    for line in open(f"{directory}/{name}.timehist"):
        m = line_pattern.match(line)
        if not m:
            continue
        t = int(round(float(m.group(1)) * 1e9))
        comm, tid = m.group(3).strip(), int(m.group(4))
        delay, run = int(round(float(m.group(6)) * 1e6)), int(round(float(m.group(7)) * 1e6))
        if t < start - 1_000_000_000 or t > end + 1_000_000_000:
            continue
        running[int(m.group(2))].append((t - run, t, f"gateway {comm}" if tid in gateway_tids else comm))
        if delay <= 0:
            continue
        span = (t - run - delay, t - run)
        if tid in gateway_tids:
            gateway_waits.append(span)
            if gateway_tids[tid].startswith("storage.") and gateway_tids[tid] != "storage.watch":
                storage_waits.append(span)
            if start <= span[0] <= end:
                wait_by_thread[gateway_tids[tid]] += delay
        elif comm.startswith("iapgw-dev pace"):
            pacer_waits.append(span)
    gateway_waits, pacer_waits, storage_waits = indexed(gateway_waits), indexed(pacer_waits), indexed(storage_waits)
    checkpoint_spans = indexed([(c[0], c[1]) for c in checkpoints])
    for cpu in running:
        running[cpu].sort()

    latencies = sorted(r["done"] - r["due"] for r in requests)
    p99 = pct(latencies, 99)
    slow = [r for r in requests if r["done"] - r["due"] >= p99]
    lo, hi = pct(latencies, 45), pct(latencies, 55)
    median = [r for r in requests if lo <= r["done"] - r["due"] <= hi]

    def attribute(r):
        a = {"latency": r["done"] - r["due"], "lag": r["lag"], "connection": max(0, r["sent"] - r["due"] - r["lag"])}
        i = bisect.bisect_right(answered, r["done"]) - 1
        batch = batches[i] if i >= 0 and batches[i][2] >= r["sent"] else None
        a["found"] = batch is not None
        if batch:
            j = bisect.bisect_right(commit_ends, batch[2]) - 1
            commit = commits[j] if j >= 0 and commits[j][0] >= batch[1] else None
            a["to_batch"] = batch[1] - r["sent"]
            a["queue_behind_commit"] = sum(max(0, min(c[2], batch[1]) - max(c[1], r["sent"]))
                                           for c in commits[max(0, j - 8):j + 1] if c is not commit)
            a["statements"] = commit[1] - commit[0] if commit else 0
            a["commit"] = commit[2] - commit[1] if commit else 0
            a["fsync"] = union_overlap(sync_spans, commit[1], commit[2]) if commit else 0
            a["answer_to_done"] = r["done"] - batch[2]
            a["batch_calls"] = batch[3]
        a["cpu_wait"] = union_overlap(gateway_waits, r["sent"], r["done"])
        a["pacer_wait"] = union_overlap(pacer_waits, r["due"], r["done"])
        a["checkpoint"] = union_overlap(checkpoint_spans, r["sent"], r["done"])
        return a

    rows = [("latency, due -> response read", "latency"),
            ("  waiting for a free connection (all 64 busy)", "connection"),
            ("  generator's own lag", "lag"),
            ("  send -> its batch taken (parse, verify, queue)", "to_batch"),
            ("    of it, behind an earlier batch's COMMIT", "queue_behind_commit"),
            ("  its batch's statements", "statements"),
            ("  its batch's COMMIT (WAL write + sync)", "commit"),
            ("    of it, fdatasync", "fsync"),
            ("  its answer -> response read", "answer_to_done"),
            ("during it: a gateway thread runnable, off-CPU", "cpu_wait"),
            ("during it: the generator runnable, off-CPU", "pacer_wait"),
            ("during it: a checkpoint pass running", "checkpoint")]
    groups = [("slowest 1%", [attribute(r) for r in slow]), ("median band", [attribute(r) for r in median])]
    print(f"{name}: {len(requests)} requests, p50 {pct(latencies, 50) / 1e6:.2f} ms, p99 {p99 / 1e6:.2f} ms, "
          f"p99.9 {pct(latencies, 99.9) / 1e6:.2f} ms; slowest 1% = {len(slow)} requests")
    print(f"  {'mean ms (p90 ms)':<50}" + "".join(f"{g:>22}" for g, _ in groups))
    for label, key in rows:
        cells = []
        for _, attributed in groups:
            values = [a[key] for a in attributed if key in a]
            cells.append(f"{sum(values) / len(values) / 1e6:9.2f} ({pct(values, 90) / 1e6:6.2f})" if values else f"{'-':>16}")
        print(f"  {label:<50}" + "".join(f"{c:>22}" for c in cells))
    for label, attributed in groups:
        found = [a for a in attributed if a["found"]]
        if not found:
            continue
        share = lambda test: 100 * sum(1 for a in found if test(a)) / len(found)
        print(f"  {label}: batch found for {len(found)}/{len(attributed)}; its COMMIT >= 2 ms {share(lambda a: a['commit'] >= 2e6):.0f}%, "
              f">= 5 ms {share(lambda a: a['commit'] >= 5e6):.0f}%; queued behind a COMMIT >= 1 ms {share(lambda a: a['queue_behind_commit'] >= 1e6):.0f}%; "
              f"CPU wait >= 1 ms {share(lambda a: a['cpu_wait'] >= 1e6):.0f}%; batch calls p50 {pct([a['batch_calls'] for a in found], 50)}")

    seconds = (end - start) / 1e9
    sizes = [b[3] for b in batches]
    commit_ms = [(c[2] - c[1]) / 1e6 for c in commits]
    statement_ms = [(c[1] - c[0]) / 1e6 for c in commits]
    # A sync inside a COMMIT is the writer's (the WAL); one inside a checkpoint pass the checkpointer's.
    commit_spans = indexed([(c[1], c[2]) for c in commits])
    inside = lambda spans, s, e: union_overlap(spans, s, e) >= (e - s) * 0.99
    in_window = [(s, e) for s, e, _, _ in syncs if start <= s <= end]
    writer_syncs = [(s, e) for s, e in in_window if inside(commit_spans, s, e)]
    checkpoint_syncs = [(e - s) / 1e6 for s, e in in_window if inside(checkpoint_spans, s, e) and not inside(commit_spans, s, e)]
    during = [(e - s) / 1e6 for s, e in writer_syncs if union_overlap(checkpoint_spans, s, e) > 0]
    apart = [(e - s) / 1e6 for s, e in writer_syncs if union_overlap(checkpoint_spans, s, e) == 0]
    print(f"  writer: {len(batches)} batches ({len(batches) / seconds:.0f}/s), calls per batch p50 {pct(sizes, 50)} p99 {pct(sizes, 99)} max {max(sizes, default=0)}; "
          f"statements p50 {pct(statement_ms, 50):.2f} p99 {pct(statement_ms, 99):.2f} ms; COMMIT p50 {pct(commit_ms, 50):.2f} p99 {pct(commit_ms, 99):.2f} max {max(commit_ms, default=0):.2f} ms")
    print(f"  the writer's WAL syncs: {len(writer_syncs)}, p50 {pct(apart + during, 50):.2f} p99 {pct(apart + during, 99):.2f} max {max(apart + during, default=0):.2f} ms; "
          f"{len(during)} of them during a checkpoint pass: p50 {pct(during, 50):.2f} p99 {pct(during, 99):.2f} ms (the rest p50 {pct(apart, 50):.2f} p99 {pct(apart, 99):.2f} ms); "
          f"the checkpointer's syncs: {len(checkpoint_syncs)}, p50 {pct(checkpoint_syncs, 50):.2f} max {max(checkpoint_syncs, default=0):.2f} ms")
    # A request sent during a sync of D ms waits out the rest of it before its own batch can start:
    # once the syncs of D ms or more cover over 1% of the run, p99 cannot be much under D.
    covered = lambda ms: sum(e - s for s, e in writer_syncs if e - s >= ms * 1e6) / (end - start) * 100
    print("  share of the run's time the writer spent in WAL syncs of >= 1 / 2 / 5 / 10 ms: "
          + " / ".join(f"{covered(ms):.1f}%" for ms in (1, 2, 5, 10)))
    # Inside the slow COMMITs (>= 5 ms): the sync, the writer runnable but off-CPU (only the writer's
    # storage thread is busy then), and the rest (blocked elsewhere: the WAL write, a lock).
    slow_commits = [c for c in commits if c[2] - c[1] >= 5e6]
    if slow_commits:
        total = sum(c[2] - c[1] for c in slow_commits)
        synced = sum(union_overlap(sync_spans, c[1], c[2]) for c in slow_commits)
        queued = sum(union_overlap(storage_waits, c[1], c[2]) for c in slow_commits)
        print(f"  {len(slow_commits)} COMMITs of >= 5 ms ({total / 1e6:.0f} ms in all): {100 * synced / total:.0f}% in fdatasync, "
              f"{100 * queued / total:.0f}% the writer runnable off-CPU, {100 * max(0, total - synced - queued) / total:.0f}% elsewhere (WAL write, locks)")
    writes = device["write"]
    print(f"  the disk itself (every process): {len(flushes_issued)} cache flushes issued; {len(writes)} writes, issue -> completion "
          f"p50 {pct(writes, 50):.2f} p99 {pct(writes, 99):.2f} max {max(writes, default=0):.2f} ms")
    passes = [(c[1] - c[0]) / 1e6 for c in checkpoints]
    print(f"  checkpoint passes: {len(checkpoints)}, p50 {pct(passes, 50):.2f} max {max(passes, default=0):.2f} ms, "
          f"pages copied p50 {pct([c[3] for c in checkpoints], 50)} max {max([c[3] for c in checkpoints], default=0)}")
    total_wait = sum(wait_by_thread.values())
    top = sorted(wait_by_thread.items(), key=lambda kv: -kv[1])[:6]
    print(f"  gateway run-queue delay: {total_wait / 1e6 / seconds:.1f} ms per second; by thread: "
          + ", ".join(f"{comm} {wait / 1e6 / seconds:.1f}" for comm, wait in top))
    # Who held the CPUs while the slowest requests' gateway threads waited for one.
    holders = defaultdict(int)
    for r in slow:
        starts, spans = gateway_waits
        k = bisect.bisect_left(starts, r["sent"] - 200_000_000)
        for a, b in spans[k:]:
            if a >= r["done"]:
                break
            a, b = max(a, r["sent"]), min(b, r["done"])
            if b <= a:
                continue
            for cpu, intervals in running.items():
                m = bisect.bisect_left(intervals, (a - 200_000_000,))
                for s, e, comm in intervals[m:]:
                    if s >= b:
                        break
                    overlap = min(e, b) - max(s, a)
                    if overlap > 0:
                        holders[re.sub(r"[-:]?\d+$", "", comm)] += overlap
    total = sum(holders.values())
    if total:
        print("  while the slowest 1%'s gateway threads waited for a CPU, the CPUs ran: "
              + ", ".join(f"{comm} {100 * t / total:.0f}%" for comm, t in sorted(holders.items(), key=lambda kv: -kv[1])[:8]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
