#!/usr/bin/env bash
# Benchmark 7 (docs/benchmarks.md): soak. Keeps 1,000 runs with tools in
# flight on one `runnel serve` for 10 minutes on loopback and checks for
# errors, RSS growth and descriptor growth; it stops by itself. Extra
# arguments go to the Go driver (go run ./bench/soak -h lists them), e.g.
#   bash bench/soak.sh -runs 100 -duration 30s
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${RUNNEL_BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"

# Each run in flight holds a few descriptors on each side; the driver
# raises its own soft limit to the hard one, and runnel inherits it.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

echo "building runnel and the soak driver into $out" >&2
go build -o "$out/runnel" ./cmd/runnel
go build -o "$out/soak" ./bench/soak

# The driver itself, not `go run`, gets the terminal's Ctrl-C: it stops
# runnel serve and prints what it measured so far.
exec "$out/soak" -runnel "$out/runnel" "$@"
