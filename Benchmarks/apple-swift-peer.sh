#!/usr/bin/env bash
# Apple's Swift library (app-store-server-library-swift 6.0.0) as a peer of the cold JWS row (row 1),
# built outside the project from source mirrors by the recipe in ../shared/peers/apple-swift/README.md.
# Nothing of it enters the project: SCRATCH is a folder outside the repository.
#   Benchmarks/apple-swift-peer.sh setup SCRATCH
#       exports the recipe's tags from the git mirrors into SCRATCH/deps, makes SCRATCH/pkg (the library
#       minus its API client, OCSP requester stubbed, the recipe's AppleSwiftBench) and builds it:
#       `nice swift build -c release -j 2` (about 3 minutes on 2 cores).
#   Benchmarks/apple-swift-peer.sh measure SCRATCH SECONDS --json FILE
#       one sitting of alternating rounds (IAPGW_PEER_ROUNDS, default 3), each process pinned to one core
#       (taskset -c IAPGW_PEER_CORE, default 1): Apple's AppleSwiftBench (SignedDataVerifier, chain built
#       on every call) and `iapgw-dev bench --profile jws-cold --seconds SECONDS`, on the same real
#       transaction and root. Both rates are wall-clock calls/s after a warm-up (the recipe's bench
#       times wall clock; iapgw's CPU-time rate is kept beside it).
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
  local apple iapgw="${IAPGW_BIN:-.build/release/iapgw-dev}" rounds="${IAPGW_PEER_ROUNDS:-3}" core="${IAPGW_PEER_CORE:-1}"
  local jws="$vectors/sandbox-consumable-transaction.jws" rootcert="$vectors/AppleRootCA-G3.cer"
  apple=$(bench_binary "$scratch")
  [[ -x "$apple" ]] || die "no peer built in $scratch: run Benchmarks/apple-swift-peer.sh setup $scratch"
  [[ -x "$iapgw" ]] || die "no $iapgw (swift build -c release --product iapgw-dev, or set IAPGW_BIN)"
  [[ -f "$jws" && -f "$rootcert" ]] || die "no vectors in $vectors (set IAPGW_APPLE_REAL)"
  local deadline i out a_rate i_rate i_cpu load_a load_i rows=() first
  deadline=$(awk -v s="$seconds" 'BEGIN { printf "%d", 2 * s + 60 }')
  run_apple() {
    out=$(within "$deadline" taskset -c "$core" "$apple" "$seconds" "$jws" "$rootcert") || die "AppleSwiftBench failed: $out"
    grep -q 'invalid=0$' <<<"$out" || die "AppleSwiftBench had invalid results: $out"
    a_rate=$(figure '=' <<<"$out")
  }
  run_iapgw() {
    out=$(within "$deadline" taskset -c "$core" "$iapgw" bench --profile jws-cold --seconds "$seconds" --vectors "$vectors") ||
      die "iapgw-dev bench --profile jws-cold failed: $out"
    i_rate=$(figure 'wall' <<<"$out"); i_cpu=$(figure 'cpu' <<<"$out")
  }
  for ((i = 1; i <= rounds; i++)); do
    # The order alternates too, so drift within a round falls on each side in turn.
    if ((i % 2)); then
      load_a=$(cut -d' ' -f1 /proc/loadavg); run_apple; load_i=$(cut -d' ' -f1 /proc/loadavg); run_iapgw; first=apple
    else
      load_i=$(cut -d' ' -f1 /proc/loadavg); run_iapgw; load_a=$(cut -d' ' -f1 /proc/loadavg); run_apple; first=iapgw
    fi
    [[ -n "$a_rate" && -n "$i_rate" ]] || die "a rate could not be read (round $i)"
    printf 'round %d (%s first, load %s / %s): Apple %.1f /s, iapgw cold %.1f /s (%.1f per CPU s): %.2f×\n' \
      "$i" "$first" "$load_a" "$load_i" "$a_rate" "$i_rate" "$i_cpu" "$(awk -v a="$a_rate" -v b="$i_rate" 'BEGIN { print b / a }')"
    rows+=("$i $first $a_rate $i_rate $i_cpu $load_a $load_i")
  done
  python3 - "$json" "$seconds" "$core" "$(cat "$scratch/sources.txt" 2>/dev/null | head -1)" "${rows[@]}" <<'EOF'
import json, sys
out, seconds, core, library = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rounds = []
for r in sys.argv[5:]:
    i, first, apple, iapgw, cpu, load_a, load_i = r.split()
    rounds.append({"round": int(i), "first": first, "apple_per_s": float(apple), "iapgw_cold_per_s": float(iapgw),
                   "iapgw_cold_per_cpu_s": float(cpu), "ratio": float(iapgw) / float(apple),
                   "load_before_apple": float(load_a), "load_before_iapgw": float(load_i)})
ratios = [r["ratio"] for r in rounds]
doc = {"library": library, "seconds": seconds, "core": core, "clock": "wall, each process pinned to the core",
       "rounds": rounds, "ratio_min": min(ratios), "ratio_max": max(ratios),
       "apple_per_s_min": min(r["apple_per_s"] for r in rounds), "apple_per_s_max": max(r["apple_per_s"] for r in rounds),
       "iapgw_cold_per_s_min": min(r["iapgw_cold_per_s"] for r in rounds),
       "iapgw_cold_per_s_max": max(r["iapgw_cold_per_s"] for r in rounds)}
json.dump(doc, open(out, "w"), indent=2)
print(f"ratio iapgw cold ÷ Apple: min {doc['ratio_min']:.2f}×, max {doc['ratio_max']:.2f}× over {len(rounds)} rounds")
EOF
}

[[ $# -ge 2 ]] || die "$usage"
case "$1" in
  setup) [[ $# == 2 ]] || die "$usage"; setup "$2" ;;
  measure) [[ $# == 5 && "$4" == --json ]] || die "$usage"; measure "$2" "$3" "$5" ;;
  *) die "$usage" ;;
esac
