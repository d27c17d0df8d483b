#!/usr/bin/env bash
# Fails when action/dist/index.js (committed: the runner executes it straight
# from the repository) is not the bundle of action/src as it is now.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bash scripts/action-bundle.sh "$tmp/index.js"
if ! cmp -s "$tmp/index.js" action/dist/index.js; then
  echo "action/dist/index.js is stale: run 'make action' and commit action/dist" >&2
  exit 1
fi
echo "action/dist is up to date"
