#!/usr/bin/env bash
# runnel's footprint (docs/benchmarks.md, benchmark 2's idle figures): the
# binary's size built plainly and stripped, and the VmRSS of an idle
# `runnel serve` after start-up and after 100 runs, each build measured in
# one invocation. Extra arguments go to the Go driver (go run
# ./bench/footprint -h lists them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ -n "${RUNNEL_BENCH_OUT:-}" ]; then
	out=$RUNNEL_BENCH_OUT
	mkdir -p "$out"
else
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi

echo "building runnel (plain, and -trimpath -ldflags='-s -w') into $out" >&2
go build -o "$out/runnel" ./cmd/runnel
go build -trimpath -ldflags='-s -w' -o "$out/runnel-stripped" ./cmd/runnel
go build -o "$out/footprint" ./bench/footprint

"$out/footprint" -plain "$out/runnel" -stripped "$out/runnel-stripped" "$@"
