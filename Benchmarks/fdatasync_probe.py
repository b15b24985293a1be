#!/usr/bin/env python3
"""The disk's own fdatasync latency, beside the gateway's WAL syncs (Benchmarks/tail-profile.sh).

Appends BYTES (default 16 KiB, a batch of a few WAL frames) to a file in DIR and fdatasyncs it, RATE
times a second for SECONDS, overwriting from the start once the file reaches 40 MB (as SQLite's WAL
does after a restart): no SQLite, no gateway, so its tail is the storage stack's alone.
  fdatasync_probe.py DIR [SECONDS] [RATE] [BYTES]
"""
import os
import sys
import time

directory = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5
rate = float(sys.argv[3]) if len(sys.argv) > 3 else 1000
size = int(sys.argv[4]) if len(sys.argv) > 4 else 16384
path = os.path.join(directory, "fdatasync-probe.bin")
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
block, offset, limit = os.urandom(size), 0, 40 << 20
durations = []
start = time.monotonic()
due = start
try:
    while time.monotonic() - start < seconds:
        os.pwrite(fd, block, offset)
        offset = (offset + size) % limit
        began = time.monotonic()
        os.fdatasync(fd)
        durations.append(time.monotonic() - began)
        due += 1 / rate
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
finally:
    os.close(fd)
    os.unlink(path)
durations.sort()
pct = lambda p: durations[min(len(durations) - 1, int(p / 100 * len(durations)))] * 1000
share = lambda ms: sum(d for d in durations if d * 1000 >= ms) / seconds * 100
print(f"bare fdatasync of {size} B appends ({len(durations)} in {seconds:.0f} s): p50 {pct(50):.2f} p99 {pct(99):.2f} "
      f"p99.9 {pct(99.9):.2f} max {durations[-1] * 1000:.2f} ms; time in syncs of >= 1 / 2 / 5 / 10 ms: "
      + " / ".join(f"{share(ms):.1f}%" for ms in (1, 2, 5, 10)))
