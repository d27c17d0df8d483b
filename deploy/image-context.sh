#!/usr/bin/env bash
# Copies what the control plane needs at run time out of a built checkout (npm ci + tsc -b
# control-plane done) into DIR: the built workspaces it loads and the production dependency
# closure of @relayctl/control-plane (`npm ls --omit=dev`), nothing else (no sources, tests,
# agent, dev tools). deploy/Dockerfile runs it in its build stage; with APP_FROM=context the
# result is the build context itself (no network or compiler needed, as in the tests):
#
#   bash deploy/image-context.sh /tmp/ctx &&
#   podman build --build-arg APP_FROM=context -f deploy/Dockerfile -t relayctl-server /tmp/ctx
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
REPO="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$1"
[ -f "$REPO/control-plane/dist/cli/main.js" ] || { echo "build first: npx tsc -b control-plane" >&2; exit 1; }
mkdir -p "$DEST"
cd "$REPO"
cp package.json "$DEST/"
for ws in control-plane proto reverse-proxy-sync tracing; do
  mkdir -p "$DEST/$ws"
  cp "$ws/package.json" "$DEST/$ws/"
  cp -a "$ws/dist" "$DEST/$ws/"
done
# What the api serves to servers being set up: the installer and the agent bundles
# (scripts/agent-bundle.mjs, run by make build); without bundles /agent/latest answers 503.
mkdir -p "$DEST/deploy"
cp deploy/install.sh "$DEST/deploy/"
if [ -f agent/dist/bundles/latest.json ]; then
  mkdir -p "$DEST/agent/dist"
  cp -a agent/dist/bundles "$DEST/agent/dist/"
else
  echo "image-context: no agent bundles (node scripts/agent-bundle.mjs): /install.sh will have nothing to download" >&2
fi
# The dashboard's pages (web/dist, `npm run build -w @relayctl/web`); without them /app/ is 503.
if [ -f web/dist/index.html ]; then
  mkdir -p "$DEST/web"
  cp -a web/dist "$DEST/web/"
else
  echo "image-context: no dashboard build (web/dist): /app/ will answer 503" >&2
fi
# Top-level packages of the closure: in the root node_modules, or in a workspace's own when npm
# could not hoist them (commander 14 sits in control-plane/node_modules because knex holds the
# root with another major); nested node_modules come with their parent. npm ls exits non-zero
# on mere warnings (an extraneous package): judge it by what it lists.
closure="$(npm ls --omit=dev --all --parseable -w @relayctl/control-plane 2>/dev/null || true)"
grep -q "/node_modules/fastify$" <<<"$closure" || { echo "npm ls listed no dependencies: run npm ci first" >&2; exit 1; }
sed -n "s|^$REPO/||p" <<<"$closure" | grep -E '^(control-plane/|proto/|reverse-proxy-sync/|tracing/)?node_modules/' |
  grep -Ev 'node_modules/.*/node_modules/' | sort -u |
  while read -r pkg; do
    mkdir -p "$DEST/$(dirname "$pkg")"
    # Workspace links (@relayctl/*) stay relative symlinks into the copied workspaces.
    cp -a "$pkg" "$DEST/$pkg"
  done
# Compiled dist/*.test.js and maps are not needed at run time.
find "$DEST" -path "$DEST/node_modules" -prune -o \( -name '*.test.js' -o -name '*.map' -o -name '*.test.d.ts' \) -type f -print0 |
  xargs -0 rm -f
exit 0
