#!/usr/bin/env bash
# Benchmark 5 (docs/benchmarks.md): stateless scale-out behind a load
# balancer. Three `runnel serve` replicas behind HAProxy, all on 127.0.0.1:
# load, pause on one replica and resume on another, SIGKILL of a replica,
# SIGTERM drain of another. About 4 minutes by default; extra arguments go
# to the Go load client (bench/scaleout, -h lists them), e.g.
#   bash bench/scaleout.sh -duration 20s -json /tmp/scaleout.json
# Installs Debian bookworm's HAProxy with apt (pinned) when it is missing,
# which needs root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

HAPROXY_VERSION=2.6.12-1+deb12u3
if [ "$(dpkg-query -W -f='${Version}' haproxy 2>/dev/null || true)" != "$HAPROXY_VERSION" ]; then
  echo "installing haproxy=$HAPROXY_VERSION with apt" >&2
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "haproxy=$HAPROXY_VERSION"
fi
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)

out=$(mktemp -d)
pid=""
cleanup() {
  # The driver stops HAProxy and the replicas it started (they also die
  # with it: they get SIGKILL when their parent exits).
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building runnel and the load client into $out" >&2
go build -o "$out/runnel" ./cmd/runnel
# Built rather than `go run`: `go run` does not pass SIGTERM on to the
# program, so the trap could not stop it.
go build -o "$out/scaleout" ./bench/scaleout

"$out/scaleout" -runnel "$out/runnel" -haproxy "$haproxy" "$@" &
pid=$!
wait "$pid"
