#!/usr/bin/env bash
# Apple's Swift library (app-store-server-library-swift 6.0.0) as a peer of the cold JWS row (row 1),
# built outside the project from source mirrors by the recipe in ../shared/peers/apple-swift/README.md.
# Nothing of it enters the project: SCRATCH is a folder outside the repository.
#   Benchmarks/apple-swift-peer.sh setup SCRATCH
#       exports the recipe's tags from the git mirrors into SCRATCH/deps, makes SCRATCH/pkg (the library
#       minus its API client, OCSP requester stubbed, the recipe's AppleSwiftBench) and builds it:
#       `nice swift build -c release -j 2` (about 3 minutes on 2 cores).
#   Benchmarks/apple-swift-peer.sh measure SCRATCH SECONDS --json FILE
#       one sitting of rounds (IAPGW_PEER_ROUNDS, default 3), each SECONDS per side as IAPGW_PEER_SLICES
#       (default 4) alternated pairs, each process pinned to one core (taskset -c IAPGW_PEER_CORE, default 1):
#       Apple's AppleSwiftBench (SignedDataVerifier, chain built on every call) and `iapgw-dev bench
#       --profile jws-cold --seconds SECONDS/SLICES`, on the same real transaction and root. Both rates
#       are wall-clock calls/s after a warm-up (the recipe's bench times wall clock; iapgw's CPU-time
#       rate is kept beside it). FILE: each round's rates, ratio, pairs and load average; min/max.
# Environment: IAPGW_MIRRORS (the folder of owner+name/repo git mirrors, default ../.mirror beside the
# project), IAPGW_APPLE_SWIFT_RECIPE (default ../shared/peers/apple-swift), IAPGW_APPLE_REAL (the
# vectors, default ../shared/testdata/apple-real), IAPGW_BIN (default .build/release/iapgw-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
root=$(pwd)
mirrors="${IAPGW_MIRRORS:-$root/../.mirror}"
recipe="${IAPGW_APPLE_SWIFT_RECIPE:-$root/../shared/peers/apple-swift}"
vectors="${IAPGW_APPLE_REAL:-$root/../shared/testdata/apple-real}"
usage="usage: Benchmarks/apple-swift-peer.sh setup SCRATCH | measure SCRATCH SECONDS --json FILE"
die() { echo "apple-swift-peer: $*" >&2; exit 1; }

# The recipe's sources: mirror name, tag, folder under SCRATCH.
sources=(
  "apple+app-store-server-library-swift v6.0.0 src"
  "vapor+jwt-kit 5.2.0 deps/jwt-kit"
  "apple+swift-crypto 3.15.1 deps/swift-crypto"
  "apple+swift-certificates 1.19.3 deps/swift-certificates"
  "apple+swift-asn1 1.7.0 deps/swift-asn1"
  "apple+swift-log 1.14.0 deps/swift-log"
)

# A mirror's git directory (the fetch tool's snapshots are bare `repo` or `repo/.git`).
git_dir() {
  local d
  for d in "$mirrors/$1/repo/.git" "$mirrors/$1/repo"; do
    if [[ -f "$d/HEAD" ]]; then echo "$d"; return; fi
  done
  return 1
}

bench_binary() { echo "$1/pkg/.build/release/AppleSwiftBench"; }

setup() {
  local scratch="$1" missing=() line name tag into dir
  case "$(realpath -m "$scratch")/" in "$root"/*) die "SCRATCH must be outside the project ($root)";; esac
  [[ -f "$recipe/README.md" && -f "$recipe/bench/AppleSwiftBench/main.swift" ]] ||
    die "no recipe in $recipe (set IAPGW_APPLE_SWIFT_RECIPE)"
  for line in "${sources[@]}"; do
    read -r name tag into <<<"$line"
    if ! dir=$(git_dir "$name") || ! git --git-dir="$dir" rev-parse -q --verify "$tag^{commit}" >/dev/null; then
      missing+=("${name/+//} $tag")
    fi
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "apple-swift-peer: missing git mirrors (or tags) in $mirrors (set IAPGW_MIRRORS):" >&2
    printf '  %s\n' "${missing[@]}" >&2
    echo "  fetch each as github:OWNER/NAME; it lands in $mirrors/OWNER+NAME/repo" >&2
    exit 1
  fi
  rm -rf "$scratch/src" "$scratch/deps" "$scratch/pkg"
  mkdir -p "$scratch"
  : >"$scratch/sources.txt"
  for line in "${sources[@]}"; do
    read -r name tag into <<<"$line"
    dir=$(git_dir "$name")
    mkdir -p "$scratch/$into"
    # Only the manifests and Sources (a whole-tree archive fails where a mirror lacks test blobs; git
    # still names a missing test blob while it walks the tree, harmlessly: that line is dropped).
    within 300 git --git-dir="$dir" archive "$tag" 'Package*.swift' Sources 2> >(grep -v "^error: invalid object .* for 'Tests/" >&2) |
      tar -x -C "$scratch/$into"
    echo "${name/+//} $tag $(git --git-dir="$dir" rev-parse "$tag^{commit}")" >>"$scratch/sources.txt"
  done
  (cd "$scratch" && within 60 patch -s -p0 <"$recipe/jwt-kit-paths.patch")
  mkdir -p "$scratch/pkg/Sources/AppleSwiftBench"
  cp -R "$scratch/src/Sources/AppStoreServerLibrary" "$scratch/pkg/Sources/"
  rm "$scratch/pkg/Sources/AppStoreServerLibrary/AppStoreServerAPIClient.swift"
  (cd "$scratch/pkg" && within 60 patch -s -p1 <"$recipe/library.patch")
  cp "$recipe/bench/AppleSwiftBench/main.swift" "$scratch/pkg/Sources/AppleSwiftBench/"
  # The recipe's manifest without the targets not built here (the cached variant, AppleSwiftParts).
  python3 - "$recipe/Package.swift" "$scratch/pkg/Package.swift" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
cut = re.search(r'\n        \.target\(\n            name: "AppStoreServerLibraryCached",.*?(?=\n    \]\n\))', text, re.S)
if not cut or "AppleSwiftParts" not in cut.group(0):
    sys.exit("apple-swift-peer: the recipe's Package.swift is not the one this script knows")
open(sys.argv[2], "w").write(text[:cut.start()] + text[cut.end():])
EOF
  echo "building Apple's Swift library in $scratch/pkg (nice swift build -c release -j 2; ~3 min on 2 cores)"
  (cd "$scratch/pkg" && SWIFTCI_USE_LOCAL_DEPS=1 within 3600 nice swift build -c release -j 2 --product AppleSwiftBench \
     >"$scratch/build.log" 2>&1) || { tail -30 "$scratch/build.log" >&2; die "the build failed (log: $scratch/build.log)"; }
  [[ -x "$(bench_binary "$scratch")" ]] || die "the build left no $(bench_binary "$scratch")"
  echo "built: $(bench_binary "$scratch")"
}

# One line's "= N /s" or "wall N /s" figure.
figure() { sed -n "s/.*$1 \([0-9.]*\) \/s.*/\1/p" | tail -1; }

measure() {
  local scratch="$1" seconds="$2" json="$3"
  local apple iapgw="${IAPGW_BIN:-.build/release/iapgw-dev}" rounds="${IAPGW_PEER_ROUNDS:-3}"
  local slices="${IAPGW_PEER_SLICES:-4}" core="${IAPGW_PEER_CORE:-1}"
  local jws="$vectors/sandbox-consumable-transaction.jws" rootcert="$vectors/AppleRootCA-G3.cer"
  apple=$(bench_binary "$scratch")
  [[ -x "$apple" ]] || die "no peer built in $scratch: run Benchmarks/apple-swift-peer.sh setup $scratch"
  [[ -x "$iapgw" ]] || die "no $iapgw (swift build -c release --product iapgw-dev, or set IAPGW_BIN)"
  [[ -f "$jws" && -f "$rootcert" ]] || die "no vectors in $vectors (set IAPGW_APPLE_REAL)"
  local slice deadline i j out a_rate i_rate i_cpu load pairs rows=()
  slice=$(awk -v s="$seconds" -v n="$slices" 'BEGIN { printf "%.3f", s / n }')
  deadline=$(awk -v s="$slice" 'BEGIN { printf "%d", 2 * s + 60 }')
  run_apple() {
    out=$(within "$deadline" taskset -c "$core" "$apple" "$slice" "$jws" "$rootcert") || die "AppleSwiftBench failed: $out"
    grep -q 'invalid=0$' <<<"$out" || die "AppleSwiftBench had invalid results: $out"
    a_rate=$(figure '=' <<<"$out")
    [[ -n "$a_rate" ]] || die "no rate in AppleSwiftBench's output: $out"
  }
  run_iapgw() {
    out=$(within "$deadline" taskset -c "$core" "$iapgw" bench --profile jws-cold --seconds "$slice" --vectors "$vectors") ||
      die "iapgw-dev bench --profile jws-cold failed: $out"
    i_rate=$(figure 'wall' <<<"$out"); i_cpu=$(figure 'cpu' <<<"$out")
    [[ -n "$i_rate" && -n "$i_cpu" ]] || die "no rate in iapgw-dev bench's output: $out"
  }
  # A round is SLICES pairs of SECONDS / SLICES each, in the order A B, B A, A B, …: the host's speed
  # drifts by tens of percent within seconds here (load average or not), and this splits the drift
  # between the two sides.
  for ((i = 1; i <= rounds; i++)); do
    load=$(cut -d' ' -f1-3 /proc/loadavg); pairs=""
    for ((j = 1; j <= slices; j++)); do
      if ((j % 2)); then run_apple; run_iapgw; else run_iapgw; run_apple; fi
      pairs+="$a_rate,$i_rate,$i_cpu "
    done
    rows+=("$i|$load|$pairs")
    awk -v i="$i" -v load="$load" -v pairs="$pairs" 'BEGIN {
      n = split(pairs, p, " ")
      for (k = 1; k <= n; k++) { split(p[k], x, ","); a += x[1]; b += x[2]; each = each sprintf("%s%.2f", k > 1 ? ", " : "", x[2] / x[1]) }
      printf "round %d (load %s): Apple %.1f /s, iapgw cold %.1f /s: %.2fx (pairs %s)\n", i, load, a / n, b / n, b / a, each }'
  done
  python3 - "$json" "$seconds" "$slices" "$core" "$(head -1 "$scratch/sources.txt" 2>/dev/null)" "${rows[@]}" <<'EOF'
import json, sys
out, seconds, slices, core, library = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rounds = []
for r in sys.argv[6:]:
    i, load, pairs = r.split("|")
    p = [[float(v) for v in x.split(",")] for x in pairs.split()]
    apple, iapgw = sum(x[0] for x in p) / len(p), sum(x[1] for x in p) / len(p)
    rounds.append({"round": int(i), "load": [float(x) for x in load.split()], "apple_per_s": apple,
                   "iapgw_cold_per_s": iapgw, "iapgw_cold_per_cpu_s": sum(x[2] for x in p) / len(p),
                   "ratio": iapgw / apple, "pairs": [{"apple_per_s": x[0], "iapgw_cold_per_s": x[1]} for x in p]})
ratios = [r["ratio"] for r in rounds]
doc = {"library": library, "seconds_per_side_per_round": seconds, "slices_per_round": slices, "core": core,
       "clock": "wall calls/s after a warm-up, each process pinned to the core", "rounds": rounds,
       "ratio_min": min(ratios), "ratio_max": max(ratios),
       "apple_per_s_min": min(r["apple_per_s"] for r in rounds), "apple_per_s_max": max(r["apple_per_s"] for r in rounds),
       "iapgw_cold_per_s_min": min(r["iapgw_cold_per_s"] for r in rounds),
       "iapgw_cold_per_s_max": max(r["iapgw_cold_per_s"] for r in rounds)}
json.dump(doc, open(out, "w"), indent=2)
print(f"iapgw cold ÷ Apple: min {doc['ratio_min']:.2f}x, max {doc['ratio_max']:.2f}x over {len(rounds)} rounds")
EOF
}

[[ $# -ge 2 ]] || die "$usage"
case "$1" in
  setup) [[ $# == 2 ]] || die "$usage"; setup "$2" ;;
  measure) [[ $# == 5 && "$4" == --json ]] || die "$usage"; measure "$2" "$3" "$5" ;;
  *) die "$usage" ;;
esac
