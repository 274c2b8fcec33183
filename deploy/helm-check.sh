#!/usr/bin/env bash
# helm-check.sh: the Helm chart (deploy/helm/runnel) lints, renders, and
# renders only valid Kubernetes objects.
#
#   deploy/helm-check.sh
#
# helm lint --strict, then helm template with the default values, with
# ci-values.yaml (every switch on) and with the optional pieces off; each
# rendering is validated by kubeconform in strict mode (no field the API
# does not define) against the schemas of one Kubernetes release. helm and
# kubeconform run with `go run module@version`, pinned; the schemas are
# made here from that release's OpenAPI document, which the Go module
# proxy serves inside the k8s.io/kubernetes module
# (deploy/openapi2jsonschema.go). So the only network is the Go module
# proxy, and nothing at all once the module cache has these. A cold build
# cache compiles helm, a few minutes on two cores; later runs take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM=helm.sh/helm/v4/cmd/helm@v4.3.1
KUBECONFORM=github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0
KUBERNETES=v1.37.2 # the release validated against (and helm's --kube-version)
CHART=deploy/helm/runnel

start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "helm-check: FAIL: $*" >&2; exit 1; }
say() { echo "helm-check: $*"; }

# The tools ignore this module's go.mod and the caller's GOFLAGS.
helm() { GOFLAGS= go run "$HELM" "$@"; }
kubeconform() { GOFLAGS= go run "$KUBECONFORM" "$@"; }

say "building $HELM and $KUBECONFORM (cached after the first run)"
helm version --short >/dev/null
kubeconform -v >/dev/null

# Schemas: api/openapi-spec/swagger.json of k8s.io/kubernetes, converted to
# kubeconform's layout: <dir>/<version>-standalone-strict/<kind>-<group>-<version>.json.
dir=$(cd "$tmp" && GOFLAGS= go mod download -json "k8s.io/kubernetes@$KUBERNETES" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
swagger="$dir/api/openapi-spec/swagger.json"
[ -f "$swagger" ] || fail "no OpenAPI document at $swagger"
schemas="$tmp/schemas"
# Run outside this module (standard library only), whatever state go.mod is in.
cp deploy/openapi2jsonschema.go "$tmp/"
(cd "$tmp" && GOFLAGS= go run openapi2jsonschema.go "$swagger" "$schemas/$KUBERNETES-standalone-strict")
validate() {
  kubeconform -strict -summary -kubernetes-version "${KUBERNETES#v}" -schema-location "$schemas" "$@"
}

# The validator rejects what it must: a mistyped field and a wrong type.
cat >"$tmp/bad.yaml" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: bad}
spec:
  replicas: three
  selector: {matchLabels: {app: bad}}
  template:
    metadata: {labels: {app: bad}}
    spec:
      containers: [{name: bad, image: bad, imagePullPolcy: Always}]
EOF
if validate "$tmp/bad.yaml" >"$tmp/bad.out" 2>&1; then
  cat "$tmp/bad.out"; fail "kubeconform accepted an invalid Deployment"
fi
grep -q 'imagePullPolcy' "$tmp/bad.out" && grep -q 'replicas' "$tmp/bad.out" ||
  { cat "$tmp/bad.out"; fail "kubeconform did not name both errors"; }
say "kubeconform rejects an invalid Deployment"

# name, then helm arguments, of each rendering.
off=(--set auth.existingSecret=runnel-token --set serviceAccount.create=false
  --set podDisruptionBudget.enabled=false --set networkPolicy.enabled=false
  --set topologySpread.enabled=false --set config.preStopSleepSeconds=0)
renders=(default ci off)
declare -A args=([default]="" [ci]="-f $CHART/ci-values.yaml" [off]="${off[*]}")
declare -A kinds=(
  [default]="Deployment NetworkPolicy PodDisruptionBudget Secret Service ServiceAccount"
  [ci]="Deployment HorizontalPodAutoscaler NetworkPolicy PodDisruptionBudget Secret Service ServiceAccount"
  [off]="Deployment Service")

for r in "${renders[@]}"; do
  # shellcheck disable=SC2086 # args are words
  helm lint --strict --kube-version "$KUBERNETES" $CHART ${args[$r]} >"$tmp/lint-$r.out" 2>&1 ||
    { cat "$tmp/lint-$r.out"; fail "helm lint --strict ($r values)"; }
  # shellcheck disable=SC2086
  helm template runnel $CHART --namespace runnel --kube-version "$KUBERNETES" ${args[$r]} >"$tmp/$r.yaml" ||
    fail "helm template ($r values)"
  got=$(sed -n 's/^kind: //p' "$tmp/$r.yaml" | sort | tr '\n' ' ')
  [ "$got" = "${kinds[$r]} " ] || fail "$r values render [$got], want [${kinds[$r]}]"
  validate "$tmp/$r.yaml" || fail "kubeconform ($r values)"
  say "$r values: lint, template, kubeconform ok ($got)"
done

# One value sets both runnel's grace and the pod's: 5 + 30 + 15, 10 + 120 + 20.
grep -q 'terminationGracePeriodSeconds: 50$' "$tmp/default.yaml" &&
  grep -A1 'name: RUNNEL_SHUTDOWN_GRACE' "$tmp/default.yaml" | grep -q 'value: "30s"' ||
  fail "default values: terminationGracePeriodSeconds is not 50 with RUNNEL_SHUTDOWN_GRACE 30s"
grep -q 'terminationGracePeriodSeconds: 150$' "$tmp/ci.yaml" &&
  grep -A1 'name: RUNNEL_SHUTDOWN_GRACE' "$tmp/ci.yaml" | grep -q 'value: "120s"' ||
  fail "ci values: terminationGracePeriodSeconds is not 150 with RUNNEL_SHUTDOWN_GRACE 120s"

# What the chart refuses.
refuse() {
  local want=$1; shift
  if helm template runnel $CHART "$@" >"$tmp/refused.out" 2>&1; then fail "rendered with $*"; fi
  grep -q "$want" "$tmp/refused.out" || { cat "$tmp/refused.out"; fail "no \"$want\" for $*"; }
}
refuse 'use runnel or runnel-agents' --set image.variant=runnel-full
refuse 'needs image.variant runnel-agents' --set sandbox.isolated.enabled=true
refuse 'at least 10' --set config.terminationMarginSeconds=5
refuse 'exactly one of' --set podDisruptionBudget.minAvailable=1
refuse 'shorter than 16' --set auth.interactionSecret=short
refuse 'needs metrics.enabled' --set autoscaling.enabled=true --set autoscaling.activeRuns.enabled=true
say "the chart refuses bad values"
say "ok in $((SECONDS - start)) s"
