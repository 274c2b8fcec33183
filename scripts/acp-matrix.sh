#!/usr/bin/env bash
# acp-matrix.sh: the real-agent scenarios of internal/agenttest (a plain
# turn, a callback tool, an approval across two runnel processes, a denial,
# a client tool; each checked for leaked processes, ports, homes and
# workspaces) against every agent named, each inside a loopback-only network
# namespace, and a results table in Markdown for docs/acp.md.
#
#   scripts/acp-matrix.sh [AGENT...]        default: pi gemini opencode
#
# CI runs claude, codex and pi on every change; this script is for the
# agents it does not run, by hand. It installs the pinned packages into
# RUNNEL_AGENTS_DIR (a fresh temporary directory when unset; point it at an
# existing one to reuse an install). Needs root or user namespaces, npm and
# the npm registry for the install, nothing else from the network.
set -euo pipefail
cd "$(dirname "$0")/.."

agents=("$@")
[ ${#agents[@]} -gt 0 ] || agents=(pi gemini opencode)

dir="${RUNNEL_AGENTS_DIR:-}"
if [ -z "$dir" ]; then
  dir="$(mktemp -d)"
  trap 'rm -rf "$dir"' EXIT
fi
export RUNNEL_AGENTS_DIR="$dir"

go build -o "$dir/runnel" ./cmd/runnel
for a in "${agents[@]}"; do
  # Installing an agent already installed at its pinned version is quick.
  "$dir/runnel" agents install "$a" >&2
done

log="$dir/matrix.log"
list=$(IFS=,; echo "${agents[*]}")
set +e
RUNNEL_TEST_AGENTS_DIR="$dir" RUNNEL_TEST_AGENTS="$list" \
  go test -count=1 -timeout 30m -v -run '^TestAgents$' ./internal/agenttest >"$log" 2>&1
status=$?
set -e

versions="$("$dir/runnel" agents list)"
echo "Measured $(date -u +%Y-%m-%d) on $(uname -srm), $(nproc) cores; \`scripts/acp-matrix.sh ${agents[*]}\`."
echo
echo "| agent | version | plain turn | callback tool | approval across two processes | denial | client tool |"
echo "|---|---|---|---|---|---|---|"
for a in "${agents[@]}"; do
  version=$(awk -v a="$a" '$1 == a || $1 == a"," { print $NF }' <<<"$versions")
  row="| $a | ${version:-?} |"
  for s in plain_turn callback_tool approval_across_two_processes denial client_tool; do
    # go test -v ends each subtest with "--- PASS: TestAgents/<agent>/<scenario> (1.23s)".
    cell=$(awk -v t="TestAgents/$a/$s" '($1 == "---" && $3 == t) { sub(":", "", $2); gsub("[()]", "", $4); print $2 " " $4 }' "$log")
    row="$row ${cell:-not run} |"
  done
  echo "$row"
done
if [ $status -ne 0 ]; then
  echo
  echo "go test failed (exit $status); its output: $log" >&2
  grep -E '^\s+\S+_test\.go:[0-9]+:' "$log" | grep -v '{"time"' | head -40 >&2 || true
  trap - EXIT
fi
exit $status
