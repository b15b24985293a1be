#!/usr/bin/env bash
# What the fixed-rate rows' slowest requests waited on: Benchmarks/verify-load.sh's re-claim peak
# and its two evenly paced runs (50% and 80% of that peak), each recorded with the gateway's writer
# trace (batches, COMMITs, checkpoint passes), its fdatasync/fsync calls and both cores' scheduler,
# then Benchmarks/tail_attribution.py: for the requests at or above p99 (and the median band), the
# time waiting for a free connection, the generator's lag, send -> batch taken, the batch's
# statements, its COMMIT and fdatasync, answer -> response; the run-queue delay of the gateway's
# threads and of the generator, the checkpoint passes, and what held the CPUs meanwhile; beside a
# bare fdatasync loop on the same disk (Benchmarks/fdatasync_probe.py), the storage stack's own tail.
#   Benchmarks/tail-profile.sh DIR [SECONDS]   (default 5 s; needs perf and wrk, runs as root)
# IAPGW_PACE_PEAK=R offers 50% / 80% of R instead of the peak it measures (A/B: the same rates for
# both binaries); IAPGW_BIN and IAPGW_SKIP_BUILD as for verify-load.sh. Keeps DIR/pace-*.{csv,json,
# sched.data,timehist,syscalls,tids} and DIR/writer.trace.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { echo "usage: Benchmarks/tail-profile.sh DIR [SECONDS]"; exit 2; }
# The disk's own fdatasync tail first, where the demo's database goes (mktemp -d), none of the gateway running.
python3 Benchmarks/fdatasync_probe.py "${TMPDIR:-/tmp}" 5 1000
IAPGW_TAIL_PROFILE="$1" IAPGW_BENCH_CSV="$1" IAPGW_BENCH_PACED_ONLY=1 exec Benchmarks/verify-load.sh "${2:-5}"
