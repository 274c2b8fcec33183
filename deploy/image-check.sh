#!/usr/bin/env bash
# image-check.sh: what the runnel image promises, checked without Docker.
#
#   deploy/image-check.sh
#
# Builds the binary with the Dockerfile's build line (run verbatim: the
# check fails if that line changes there and not here), checks it is
# static, then starts it as the image does — uid 65532, no shell or
# program on its PATH, a token — on a free loopback port, and checks:
# it refuses a non-loopback address without a token, GET /health answers
# 200 without the token, POST /run without it answers 401, and on SIGTERM
# it exits 0 within the shutdown grace. Everything lives in a temporary
# directory, removed on exit; the only traffic is on loopback (and the Go
# module proxy, when the build needs a module it has not cached).
# Running as another uid needs root (setpriv, util-linux); otherwise the
# binary runs as the current, non-root user.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Dockerfile's build line, verbatim (TARGETOS/TARGETARCH are
# BuildKit's; /out is the build stage's output directory).
BUILD_LINE='CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/runnel ./cmd/runnel'
UID_GID=65532
GRACE_SECONDS=5

fail() { echo "image-check: FAIL: $*" >&2; exit 1; }
say() { echo "image-check: $*"; }

tmp="" pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  [ -z "$tmp" ] || rm -rf "$tmp"
}
trap cleanup EXIT

# 1. The build line is the Dockerfile's, and its only go build.
[ "$(grep -cF -- "$BUILD_LINE" Dockerfile)" = 1 ] ||
  fail "the Dockerfile's build line is not, once, the one this script runs: $BUILD_LINE"
[ "$(grep -c 'go build' Dockerfile)" = 1 ] || fail "the Dockerfile has more than one go build"
go_version=$(sed -n 's/^ARG GO_VERSION=//p' Dockerfile)
[ "go$go_version" = "$(go env GOVERSION)" ] ||
  say "note: the image builds with Go $go_version, this check with $(go env GOVERSION)"

tmp=$(mktemp -d)
chmod 755 "$tmp" # the binary must be reachable by uid $UID_GID
say "building with the Dockerfile's line"
(
  export GOTOOLCHAIN=local TARGETOS=linux TARGETARCH
  TARGETARCH=$(go env GOARCH)
  timeout 900 bash -c "${BUILD_LINE//\/out\//$tmp/}"
)
bin="$tmp/runnel"
[ -x "$bin" ] || fail "the build made no $bin"

# 2. Static: no cgo, no interpreter, no shared library; stripped (-s -w,
# which go version -m does not record under -trimpath).
info=$(go version -m "$bin")
for want in 'CGO_ENABLED=0' '-trimpath=true'; do
  grep -qF -- "$want" <<<"$info" || fail "go version -m shows no $want:"$'\n'"$info"
done
if command -v file >/dev/null; then
  desc=$(file -b "$bin")
  grep -q 'statically linked' <<<"$desc" || fail "not statically linked: $desc"
  grep -q ', stripped' <<<"$desc" || fail "not stripped: $desc"
  ! grep -q 'interpreter' <<<"$desc" || fail "has an ELF interpreter: $desc"
fi
if ldd "$bin" >/dev/null 2>&1; then fail "ldd finds shared libraries: $(ldd "$bin")"; fi
say "static and stripped: CGO_ENABLED=0, -trimpath$(command -v file >/dev/null && echo ", $(file -b "$bin" | cut -d, -f2,4)")"

# 3. Run it as the image does.
mkdir "$tmp/state" "$tmp/empty"
if [ "$(id -u)" = 0 ]; then
  command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to run as uid $UID_GID"
  as=("$(command -v setpriv)" "--reuid=$UID_GID" "--regid=$UID_GID" --clear-groups)
  chown "$UID_GID:$UID_GID" "$tmp/state"
  want_uid=$UID_GID
else
  say "not root: running as uid $(id -u), not $UID_GID"
  as=()
  want_uid=$(id -u)
fi
chmod 700 "$tmp/state"
mkdir -p "$tmp/state/home" "$tmp/state/tmp" "$tmp/state/work"
[ "$(id -u)" != 0 ] || chown -R "$UID_GID:$UID_GID" "$tmp/state"
token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
# No program on PATH, as in distroless: runnel must start without bwrap,
# bash or anything else.
run_env=(env -i "PATH=$tmp/empty" "HOME=$tmp/state/home" "TMPDIR=$tmp/state/tmp"
  RUNNEL_LOG_FORMAT=json RUNNEL_SHUTDOWN_GRACE=${GRACE_SECONDS}s
  "RUNNEL_WORKSPACE_ROOT=$tmp/state/work")

# Without a token, a non-loopback address is refused before listening.
if out=$(timeout 20 "${run_env[@]}" RUNNEL_HOST=0.0.0.0 RUNNEL_PORT=0 "${as[@]}" "$bin" serve 2>&1); then
  fail "runnel served on 0.0.0.0 without a token"
fi
grep -q 'refusing to listen' <<<"$out" || fail "no refusal without a token: $out"
say "refuses 0.0.0.0 without a token"

log="$tmp/serve.log"
"${run_env[@]}" RUNNEL_HOST=127.0.0.1 RUNNEL_PORT=0 "RUNNEL_TOKEN=$token" "${as[@]}" "$bin" serve >"$log" 2>&1 &
pid=$!
addr=""
for _ in $(seq 100); do # 20 s
  kill -0 "$pid" 2>/dev/null || fail "runnel exited at start:"$'\n'"$(cat "$log")"
  addr=$(sed -n 's/.*"msg":"runnel listening".*"addr":"\([0-9.]*:[0-9]*\)".*/\1/p' "$log")
  [ -z "$addr" ] || break
  sleep 0.2
done
[ -n "$addr" ] || fail "runnel did not listen within 20 s:"$'\n'"$(cat "$log")"
case "$addr" in 127.0.0.1:*) ;; *) fail "listening on $addr, not loopback" ;; esac
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
[ "$uid" = "$want_uid" ] || fail "runnel runs as uid $uid, not $want_uid"
say "listening on $addr as uid $uid"

status() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" || true; }
code=""
for _ in $(seq 50); do # 10 s
  code=$(status "http://$addr/health")
  [ "$code" != 200 ] || break
  sleep 0.2
done
[ "$code" = 200 ] || fail "GET /health answered $code"
say "GET /health: 200 without a token"
code=$(status -X POST -H 'Content-Type: application/json' --data '{}' "http://$addr/run")
[ "$code" = 401 ] || fail "POST /run without a token answered $code, not 401"
code=$(status -X POST -H "Authorization: Bearer wrong-$token" --data '{}' "http://$addr/run")
[ "$code" = 401 ] || fail "POST /run with a wrong token answered $code, not 401"
code=$(status -H "Authorization: Bearer $token" "http://$addr/v1/capabilities")
[ "$code" = 200 ] || fail "GET /v1/capabilities with the token answered $code"
say "POST /run: 401 without the token or with a wrong one; the token is accepted"
! grep -qF -- "$token" "$log" || fail "the token is in runnel's log"

# 4. SIGTERM: drain, exit 0 within the grace.
kill -TERM "$pid"
start=$SECONDS
while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - start)) -le "$GRACE_SECONDS" ]; do sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "runnel still runs $GRACE_SECONDS s after SIGTERM"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" = 0 ] || fail "runnel exited $rc after SIGTERM:"$'\n'"$(tail -5 "$log")"
grep -q '"msg":"stopped"' "$log" || fail "no \"stopped\" in runnel's log"
say "SIGTERM: exit 0 in $((SECONDS - start)) s (grace ${GRACE_SECONDS} s)"
say "ok"
