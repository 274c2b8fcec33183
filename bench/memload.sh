#!/usr/bin/env bash
# Benchmark 2 (docs/benchmarks.md): memory per concurrent streaming run of
# `runnel serve`, at 100 and 1,000 open streams. Extra arguments go to the
# Go load client (go run ./bench/memload -h lists them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${RUNNEL_BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"

echo "building runnel into $out/runnel" >&2
go build -o "$out/runnel" ./cmd/runnel

exec go run ./bench/memload -runnel "$out/runnel" "$@"
