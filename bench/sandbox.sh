#!/usr/bin/env bash
# Benchmark 4 (docs/benchmarks.md): the isolated sandbox against the local
# one, each measured beside the other in one invocation:
#   1. the start of `bash -c true` as a run's bash builtin runs it, on
#      local and on isolated under three policies (go run ./bench/sandbox);
#   2. an agent's turn through `runnel serve` on local and on isolated
#      (bench/acp.sh -bench isolated; the agents in $RUNNEL_AGENTS_DIR,
#      skipped when there are none).
# Needs bubblewrap. Extra arguments go to bench/acp.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
echo "== bash -c true, local against isolated"
go run ./bench/sandbox -rounds "${SANDBOX_ROUNDS:-200}"
echo
echo "== an agent's turn through runnel, local against isolated"
bash bench/acp.sh -bench isolated "$@"
