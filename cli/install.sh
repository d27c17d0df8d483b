#!/bin/sh
# relayctl CLI installer. The control plane serves it with its own URL filled in:
#
#   curl -fsSL https://<control-plane>/cli/install.sh | sh
#
# Downloads the single-file CLI from the control plane (GET /cli/latest, then
# /cli/<version>/<file> and its .sha256), checks its SHA-256 and installs it as
# ~/.local/bin/relayctl (/usr/local/bin/relayctl when run as root), replaced atomically, so running
# it again upgrades. The CLI is JavaScript in one file: it needs Node.js 24 or newer on PATH, and
# this script stops before downloading anything when there is none.
set -eu

base_url=''  # @control-plane-url: the control plane serving this script writes its URL here
required_node=24

usage() {
  cat <<'EOF'
usage: install.sh [options]        (curl -fsSL <control plane>/cli/install.sh | sh -s -- [options])
  --dir DIR       install relayctl into DIR (default ~/.local/bin, or /usr/local/bin as root)
  --url URL       control plane base URL (default: the control plane that served this script)
  --version V     install CLI version V instead of the latest
EOF
}

say() { printf '==> %s\n' "$*"; }
die() {
  printf 'install.sh: %s\n' "$*" >&2
  exit 1
}

dir="" version=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir | --url | --version)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --dir) dir="$2" ;;
        --url) base_url="$2" ;;
        --version) version="$2" ;;
      esac
      shift 2
      ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

[ -n "$base_url" ] || die "no control plane URL: pass --url https://<control plane>"
base_url="${base_url%/}"
if [ -z "$dir" ]; then
  if [ "$(id -u)" -eq 0 ]; then dir=/usr/local/bin; else dir="${HOME:?HOME is not set}/.local/bin"; fi
fi

# ---------------------------------------------------------------- Node.js 24
# Checked first: without it the download would be of no use.
node_version=$(node -p process.versions.node 2>/dev/null || true)
case "$node_version" in
  "") die "relayctl needs Node.js $required_node or newer, and there is no node on PATH: install Node.js $required_node (https://nodejs.org/en/download, or your package manager), then run this again" ;;
esac
if [ "${node_version%%.*}" -lt "$required_node" ]; then
  die "relayctl needs Node.js $required_node or newer; the node on PATH ($(command -v node)) is $node_version: install Node.js $required_node (https://nodejs.org/en/download, or your package manager), then run this again"
fi

if command -v curl >/dev/null 2>&1; then
  fetch() { curl -fsSL --retry 2 -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
  fetch() { wget -q -O "$2" "$1"; }
else
  die "needs curl or wget to download the CLI"
fi

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d' ' -f1
  else
    node -e 'process.stdout.write(require("crypto").createHash("sha256").update(require("fs").readFileSync(process.argv[1])).digest("hex"))' "$1"
  fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# ---------------------------------------------------------------- what to download
if [ -z "$version" ]; then
  fetch "$base_url/cli/latest" "$tmp/latest.json" ||
    die "could not read $base_url/cli/latest (is the URL right, and was the CLI bundle built there: make build?)"
  version=$(node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(j.version)' "$tmp/latest.json") ||
    die "$base_url/cli/latest is not the answer of a relayctl control plane"
fi
file="relayctl-$version.cjs"
fetch "$base_url/cli/$version/$file.sha256" "$tmp/sum" ||
  die "the control plane has no CLI version $version ($base_url/cli/$version/$file.sha256)"
expected=$(cut -d' ' -f1 "$tmp/sum")
case "$expected" in
  [0-9a-f]*) [ ${#expected} -eq 64 ] || die "$file.sha256 does not hold a SHA-256" ;;
  *) die "$file.sha256 does not hold a SHA-256" ;;
esac

# ---------------------------------------------------------------- download, verify, install
say "downloading $base_url/cli/$version/$file"
fetch "$base_url/cli/$version/$file" "$tmp/$file" || die "download failed: $base_url/cli/$version/$file"
actual=$(sha256_of "$tmp/$file")
[ "$actual" = "$expected" ] || die "checksum mismatch for $file: expected sha256 $expected from the control plane, the download has $actual. The file is corrupt or was tampered with; nothing was installed"
got=$(node "$tmp/$file" --version 2>"$tmp/err") ||
  die "the downloaded CLI does not run on $(command -v node) ($node_version): $(cat "$tmp/err")"

mkdir -p "$dir" || die "cannot create $dir"
# Beside the target and renamed over it: a relayctl running during an upgrade keeps its file.
cp "$tmp/$file" "$dir/.relayctl.$$"
chmod 755 "$dir/.relayctl.$$"
mv -f "$dir/.relayctl.$$" "$dir/relayctl"
say "installed relayctl $got as $dir/relayctl (sha256 $actual)"

case ":${PATH:-}:" in
  *":$dir:"*) ;;
  *) say "$dir is not on your PATH: add it (export PATH=\"$dir:\$PATH\") or run $dir/relayctl" ;;
esac
say "next: relayctl login --url $base_url"
