#!/usr/bin/env bash
# Prints the directory of a Node.js 24 `bin/` for the Makefile to put first on PATH, or nothing
# when the `node` already on PATH is 24 or newer. relayctl needs Node 24 LTS (Node 20 reached end
# of life on 2026-04-30); machines whose own Node is older get it from the npm registry, the one
# registry every machine we run on reaches: the package node-linux-<arch> holds the official
# build (bin/node, include/node for node-gyp). It is unpacked once into .tools/ (ignored by git),
# reused by every later run, and checked by running it: a half-unpacked or wrong one is replaced.
#
#   bash scripts/node-runtime.sh        what the Makefile runs (messages on stderr)
#   RELAYCTL_NODE_VERSION=24.x.y        another exact version from the registry
set -euo pipefail

VERSION="${RELAYCTL_NODE_VERSION:-24.21.0}"
REQUIRED_MAJOR=24
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS="$ROOT/.tools"

say() { echo "[node] $*" >&2; }

major_of() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

# A Node on PATH that is new enough wins: nothing to fetch.
if command -v node >/dev/null 2>&1 && [ "$(major_of node)" -ge "$REQUIRED_MAJOR" ]; then
  exit 0
fi

case "$(uname -m)" in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *)
    say "no Node.js $REQUIRED_MAJOR package for $(uname -m) in the npm registry: install Node.js >= $REQUIRED_MAJOR yourself"
    exit 1
    ;;
esac

dir="$TOOLS/node-v$VERSION-linux-$arch"
if [ "$("$dir/bin/node" -p process.versions.node 2>/dev/null || true)" = "$VERSION" ]; then
  echo "$dir/bin"
  exit 0
fi

command -v npm >/dev/null 2>&1 || {
  say "Node.js $REQUIRED_MAJOR is needed and there is no npm to fetch it with: install Node.js >= $REQUIRED_MAJOR"
  exit 1
}
say "this machine's Node is $(node --version 2>/dev/null || echo missing); fetching Node.js $VERSION (node-linux-$arch, ~52 MB) from the npm registry into .tools/"
mkdir -p "$TOOLS"
tmp="$(mktemp -d "$TOOLS/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "node-linux-$arch@$VERSION" >/dev/null)
mkdir "$tmp/unpacked"
tar -xzf "$tmp"/node-linux-"$arch"-"$VERSION".tgz -C "$tmp/unpacked"
got="$("$tmp/unpacked/package/bin/node" -p process.versions.node 2>/dev/null || true)"
[ "$got" = "$VERSION" ] || {
  say "the fetched node-linux-$arch@$VERSION does not run here (it printed '$got')"
  exit 1
}
rm -rf "$dir"
mv "$tmp/unpacked/package" "$dir"
say "Node.js $VERSION ready in $dir"
echo "$dir/bin"
