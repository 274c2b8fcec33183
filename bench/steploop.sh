#!/usr/bin/env bash
# Benchmark 1 (docs/benchmarks.md): per-step overhead of a 20-step tool loop,
# runnel against the Vercel AI SDK (streamText and generateText), in one
# invocation. Extra arguments go to the Go driver (go run ./bench/steploop -h
# lists them), e.g.
#   bash bench/steploop.sh -steps 200 -warmup 2 -rounds 4 -runs 4
#   bash bench/steploop.sh -history-kb 400 -warmup 3 -rounds 4 -runs 5
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${RUNNEL_BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"

echo "building runnel into $out/runnel" >&2
go build -o "$out/runnel" ./cmd/runnel

if [ ! -d bench/aisdk/node_modules/ai ]; then
	echo "installing the AI SDK side (npm ci in bench/aisdk)" >&2
	(cd bench/aisdk && npm ci --no-audit --no-fund --loglevel=error)
fi

exec go run ./bench/steploop -runnel "$out/runnel" -aisdk bench/aisdk "$@"
