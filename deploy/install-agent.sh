#!/usr/bin/env bash
# One-line agent install, run on the server to manage:
#   curl -fsSL https://<control-plane>/install-agent.sh | sudo bash -s -- --url https://<control-plane> --token rjt_...
# or, from a checkout: sudo deploy/install-agent.sh --url ... --token rjt_...
#
# Installs the agent under /opt/relayctl (from the checkout this script sits in,
# or RELAYCTL_SOURCE), enrolls it with the single-use join token and starts the
# systemd unit. Re-running with a new token re-enrolls (rotates the credential).
set -euo pipefail

url="" token="" source_dir="${RELAYCTL_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
while [ $# -gt 0 ]; do
  case "$1" in
    --url) url="$2"; shift 2 ;;
    --token) token="$2"; shift 2 ;;
    --source) source_dir="$2"; shift 2 ;;
    *) echo "install-agent: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$url" ] || { echo "install-agent: --url <control plane URL> is required" >&2; exit 2; }
case "$token" in rjt_*) ;; *) echo "install-agent: --token must be a join token (rjt_...)" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "install-agent: run as root (sudo)" >&2; exit 2; }
command -v node >/dev/null || { echo "install-agent: Node.js 20+ is required (apt-get install nodejs)" >&2; exit 2; }

echo "==> installing the agent into /opt/relayctl"
mkdir -p /opt/relayctl
if [ "$source_dir" != /opt/relayctl ]; then
  tar -C "$source_dir" --exclude=.git --exclude=.relayctl -cf - . | tar -C /opt/relayctl -xf -
fi
# Build from source when the copy has no agent/dist (a fresh checkout), then drop
# the build tools again.
(
  cd /opt/relayctl
  npm ci --no-audit --no-fund >/dev/null
  [ -f agent/dist/cli/main.js ] || npx tsc -b agent
  npm prune --omit=dev --no-audit --no-fund >/dev/null
)

echo "==> enrolling with $url"
RELAYCTL_AGENT_STATE_DIR=/var/lib/relayctl-agent node /opt/relayctl/agent/dist/cli/main.js enroll --url "$url" --token "$token"

echo "==> starting relayctl-agent.service"
install -m 0644 /opt/relayctl/deploy/systemd/relayctl-agent.service /etc/systemd/system/relayctl-agent.service
systemctl daemon-reload
systemctl enable --now relayctl-agent.service
echo "==> done: the agent dials out to the gateway; no inbound port is needed"
