#!/usr/bin/env bash
# Fails when proto/gen is not what `make proto` would write from agent.proto.
set -euo pipefail
cd "$(dirname "$0")/../proto"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
../node_modules/.bin/buf generate -o "$tmp"
../node_modules/.bin/biome format --write "$tmp/gen" >/dev/null
if ! diff -r "$tmp/gen" gen >/dev/null; then
  diff -ru gen "$tmp/gen" | head -40 || true
  echo "proto/gen is stale: run 'make proto' and commit the result" >&2
  exit 1
fi
echo "proto/gen is up to date"
