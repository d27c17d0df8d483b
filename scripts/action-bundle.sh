#!/usr/bin/env bash
# Bundles the deploy-sync action (action/src) into one CommonJS file for the
# runner's node24: action/dist/index.js, or the file given as $1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "${1:-$root/action/dist/index.js}")"
cd "$root/action"
"$root/node_modules/.bin/esbuild" src/main.ts --bundle --platform=node --target=node24 --format=cjs \
  --outfile="$out" --legal-comments=none --log-level=warning
