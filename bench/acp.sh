#!/usr/bin/env bash
# Benchmark 3 (docs/benchmarks.md): ACP harnesses. Time to first text of
# each installed agent (claude, codex, pi), alone against through runnel,
# and one tool round trip through runnel's MCP server against Agenta's
# 300 ms file relay. Installs nothing: the agents come from -agents DIR
# (default $RUNNEL_AGENTS_DIR). Extra arguments go to the Go driver
# (go run ./bench/acp -h lists them).
#
# The driver runs inside a network namespace that holds only loopback, so
# the real agents cannot reach anything but the scripted model server.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${RUNNEL_BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"

echo "building runnel, the fake ACP agent and the driver into $out" >&2
go build -o "$out/runnel" ./cmd/runnel
go build -o "$out/fakeagent" ./internal/harness/acp/fakeagent
go build -o "$out/acpbench" ./bench/acp

# Root gets a plain network namespace; anyone else one inside a user
# namespace of their own (where they are root).
unshare=(unshare -n)
if [ "$(id -u)" != 0 ]; then
	unshare=(unshare -r -n)
fi
exec "${unshare[@]}" sh -c 'ip link set lo up && exec "$@"' sh \
	"$out/acpbench" -runnel "$out/runnel" -fakeagent "$out/fakeagent" "$@"
