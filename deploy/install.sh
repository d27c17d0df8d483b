#!/bin/sh
# relayctl agent installer. The control plane serves it with its own URL filled in:
#
#   curl -fsSL https://<control-plane>/install.sh | sudo sh -s -- --token rjt_...
#
# Downloads the agent bundle for this machine's arch from the control plane (GET /agent/latest,
# then /agent/<version>/<file>), checks its SHA-256 and the control plane's Ed25519 signature of it
# (the public key pinned by --signing-key, which the join token's install command carries, so a
# tampered mirror or cache is caught before anything of the download runs), installs it under
# /opt/relayctl-agent/<version> with a `current` symlink switched atomically, enrolls with the
# join token, writes /etc/systemd/system/relayctl-agent.service (a dedicated system user,
# hardened) and starts it. Run it again to upgrade (and with a new --token to re-enroll);
# --uninstall removes everything it installed. A run that fails removes what it added and leaves
# an earlier install as it was. Needs no Node.js and compiles nothing: each bundle carries its
# own Node.js 24 and node-pty's prebuilt addon for its arch (x64, arm64). What it runs: sh, curl
# or wget, tar, gzip, openssl (3.0 or newer: the signature; also the SHA-256 without sha256sum),
# sha256sum, uname, id, mktemp, sed, grep, tr, cut, tail, readlink, and mkdir/mv (with
# -T)/rm/ln/chmod/cat/dirname/basename from coreutils or busybox.
set -eu

base_url=''  # @control-plane-url: the control plane serving this script writes its URL here
signing_key=''  # @agent-signing-key: and the public key its bundles are signed with

usage() {
  cat <<'EOF'
usage: install.sh [--token rjt_...] [options]
  --token TOKEN   join token (admin create-join-token): needed on the first install; given
                  again, it re-enrolls (the server's credential is rotated)
  --url URL       control plane base URL (default: the control plane that served this script)
  --version V     install agent version V instead of the latest
  --signing-key K the control plane's bundle-signing public key (base64, from the join token's
                  install command or GET /agent/latest); the download must carry its signature
  --mirror URL    download the bundle from URL/<file> instead; its checksum and signature
                  still come from the control plane
  --prefix DIR    install under DIR as a scratch root (tests): the unit's paths point inside
                  DIR, no system user is created and nothing is chowned
  --no-systemd    write the unit but do not call systemctl
  --uninstall     stop the agent and remove everything this script installed
EOF
}

say() { printf '==> %s\n' "$*"; }
die() {
  printf 'install.sh: %s\n' "$*" >&2
  exit 1
}

token="" version="" mirror="" prefix="" systemd=yes uninstall=no
while [ $# -gt 0 ]; do
  case "$1" in
    --token | --url | --version | --mirror | --prefix | --signing-key)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --token) token="$2" ;;
        --url) base_url="$2" ;;
        --version) version="$2" ;;
        --mirror) mirror="$2" ;;
        --prefix) prefix="$2" ;;
        --signing-key) signing_key="$2" ;;
      esac
      shift 2
      ;;
    --no-systemd) systemd=no; shift ;;
    --uninstall) uninstall=yes; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

case "$prefix" in
  "") ;;
  /*) prefix="${prefix%/}" ;;
  *) die "--prefix must be an absolute path" ;;
esac
opt="$prefix/opt/relayctl-agent"
state="$prefix/var/lib/relayctl-agent"
etc="$prefix/etc/relayctl-agent"
unit="$prefix/etc/systemd/system/relayctl-agent.service"
user=relayctl-agent

if [ -z "$prefix" ] && [ "$(id -u)" -ne 0 ]; then
  die "run as root (curl -fsSL <control plane>/install.sh | sudo sh -s -- --token rjt_...)"
fi

# ---------------------------------------------------------------- uninstall
if [ "$uninstall" = yes ]; then
  if [ "$systemd" = yes ] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now relayctl-agent.service >/dev/null 2>&1 || true
  fi
  rm -f "$unit"
  if [ "$systemd" = yes ] && command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload || true; fi
  rm -rf "$opt" "$state" "$etc"
  if [ -z "$prefix" ] && id -u "$user" >/dev/null 2>&1; then userdel "$user" || true; fi
  if [ -n "$prefix" ]; then
    # A scratch root is left as it was found: the folders made for the files go too.
    for d in etc/systemd/system etc/systemd etc opt var/lib var; do rmdir "$prefix/$d" 2>/dev/null || true; done
  fi
  say "relayctl-agent uninstalled. The server is still listed on the control plane: revoke its"
  say "credential there with: relayctl-server admin revoke-agent --server <name>"
  exit 0
fi

# ---------------------------------------------------------------- checks
case "$token" in "" | rjt_*) ;; *) die "--token must be a join token (rjt_...)" ;; esac
[ -n "$base_url" ] || die "--url <control plane URL> is required when this script is not served by one"
base_url="${base_url%/}"
case "$base_url" in http://* | https://*) ;; *) die "--url must start with https:// or http://" ;; esac
# Plain http to another machine (issue 31, defect 7): the join token, the agent credential the
# enrollment answers with and this very script cross the network in the clear. Loopback is dev.
case "$base_url" in
  http://localhost | http://localhost[:/]* | http://*.localhost | http://*.localhost[:/]* | \
    http://127.* | http://\[::1\] | http://\[::1\][:/]*) ;;
  http://*)
    printf 'install.sh: WARNING: %s is plain http: the join token and the agent credential cross the\n' "$base_url" >&2
    printf 'install.sh: WARNING: network unencrypted, and this script could have been changed on the way.\n' >&2
    printf 'install.sh: WARNING: use the control plane'"'"'s https:// URL (RELAYCTL_PUBLIC_URL) unless this network is yours.\n' >&2
    ;;
esac
# An Ed25519 SubjectPublicKeyInfo (44 bytes) in base64: its fixed 12-byte prefix, then the key.
case "$signing_key" in
  "") die "no --signing-key: the bundle's signature cannot be checked (the join token's install
  command carries the key; GET <control plane>/agent/latest names it as signing_key)" ;;
  MCowBQYDK2VwAyEA*) ;;
  *) die "--signing-key must be an Ed25519 public key in base64 (MCowBQYDK2VwAyEA...)" ;;
esac
[ ${#signing_key} -eq 60 ] || die "--signing-key must be an Ed25519 public key in base64 (60 characters)"
# The bundle's arch, named as Node.js names it (the bundles carry their own Node.js).
platform=$(uname -s)
[ "$platform" = Linux ] || die "relayctl-agent runs on Linux only (this is $platform)"
machine=$(uname -m)
case "$machine" in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) die "no agent bundle for linux-$machine (bundles: x64, arm64)" ;;
esac

if command -v curl >/dev/null 2>&1; then
  fetch() { curl -fsSL --retry 2 -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
  fetch() { wget -q -O "$2" "$1"; }
else
  die "curl or wget is required"
fi
if command -v sha256sum >/dev/null 2>&1; then
  sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v openssl >/dev/null 2>&1; then
  sha256_of() { openssl dgst -sha256 -r "$1" | cut -d' ' -f1; }
else
  die "sha256sum (coreutils) or openssl is required to check the download"
fi
# Ed25519 verification of a plain message (pkeyutl -rawin) came with OpenSSL 3.0.
command -v openssl >/dev/null 2>&1 && openssl pkeyutl -help 2>&1 | grep -q -- -rawin ||
  die "openssl 3.0 or newer is required to check the bundle's signature"

# ---------------------------------------------------------------- rollback
# Everything this run creates is listed; a run that does not reach the end removes it again
# and puts back what it moved aside, so a failure leaves the machine as it found it.
tmp=$(mktemp -d)
: >"$tmp/created"
: >"$tmp/moved"
done_ok=no
rollback() {
  if [ "$done_ok" != yes ]; then
    # Newest first: a folder is removed after what was made inside it.
    sed '1!G;h;$!d' "$tmp/created" | while IFS= read -r path; do
      case "$path" in
        user:*) userdel "${path#user:}" 2>/dev/null || true ;;
        ?*) rm -rf "$path" ;;
      esac
    done
    while IFS= read -r moved; do
      if [ -n "$moved" ]; then mv "$moved.relayctl-old" "$moved" 2>/dev/null || true; fi
    done <"$tmp/moved"
    [ -s "$tmp/created" ] && printf 'install.sh: rolled back: nothing of this run was left installed\n' >&2
  fi
  rm -rf "$tmp"
}
trap rollback EXIT
trap 'exit 130' INT TERM

# mkdir -p that lists the topmost folder it creates.
mkdir_tracked() {
  top="" d="$1"
  while [ ! -e "$d" ]; do
    top="$d"
    d=$(dirname "$d")
  done
  [ -z "$top" ] && return 0
  mkdir -p "$1"
  printf '%s\n' "$top" >>"$tmp/created"
}

# ---------------------------------------------------------------- which bundle
if [ -z "$version" ]; then
  fetch "$base_url/agent/latest" "$tmp/latest.json" ||
    die "cannot get $base_url/agent/latest (is --url the control plane's address?)"
  # {"version":"V","bundles":[{"arch":"x64","url":"...","sha256":"..."},...]}, read without
  # Node: one line per JSON object, then the fields of the top object and of this arch's.
  # Whatever is read is checked against its strict shape below, so odd JSON is refused.
  tr -d '\n\r' <"$tmp/latest.json" | tr '{}' '\n\n' >"$tmp/latest.lines"
  field() { sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"\([^\"]*\)\".*/\1/p"; }
  version=$(grep -v '"arch"' "$tmp/latest.lines" | field version | sed -n '1p')
  expected=$(grep "\"arch\"[[:space:]]*:[[:space:]]*\"$arch\"" "$tmp/latest.lines" | field sha256 | sed -n '1p')
  case "$expected" in
    "" | *[!0-9a-f]*) die "the control plane offers no agent bundle for linux-$arch" ;;
  esac
  [ ${#expected} -eq 64 ] || die "the control plane offers no agent bundle for linux-$arch"
fi
case "$version" in *[!0-9A-Za-z.+-]* | "") die "bad version: $version" ;; esac
file="relayctl-agent-$version-linux-$arch.tar.gz"
if [ -z "${expected:-}" ]; then
  fetch "$base_url/agent/$version/$file.sha256" "$tmp/sum" ||
    die "the control plane has no agent $version for linux-$arch ($base_url/agent/$version/$file.sha256)"
  expected=$(cut -d' ' -f1 "$tmp/sum")
fi
dest="$opt/$version"

# ---------------------------------------------------------------- download, verify, unpack
if [ -f "$dest/.relayctl-sha256" ] && [ "$(cat "$dest/.relayctl-sha256")" = "$expected" ]; then
  say "relayctl-agent $version is already unpacked in $dest"
else
  src="${mirror:-$base_url/agent/$version}"
  src="${src%/}/$file"
  say "downloading $src"
  fetch "$src" "$tmp/$file" || die "download failed: $src"
  actual=$(sha256_of "$tmp/$file")
  [ "$actual" = "$expected" ] || die "checksum mismatch for $file: expected sha256 $expected from
  the control plane, the download has $actual. The file is corrupt or was tampered with;
  nothing was installed."
  # The checksum came from the same place as the file: the signature is what a mirror, a cache
  # or anyone between cannot make (install/signing.ts has the line it covers).
  fetch "$base_url/agent/$version/$file.sig" "$tmp/sig.b64" ||
    die "cannot get the signature of $file ($base_url/agent/$version/$file.sig)"
  printf -- '-----BEGIN PUBLIC KEY-----\n%s\n-----END PUBLIC KEY-----\n' "$signing_key" >"$tmp/key.pem"
  printf 'relayctl-agent-bundle v1 %s %s\n' "$file" "$actual" >"$tmp/statement"
  tr -d '\n\r' <"$tmp/sig.b64" | openssl base64 -d -A -out "$tmp/sig" 2>/dev/null &&
    openssl pkeyutl -verify -pubin -inkey "$tmp/key.pem" -rawin -in "$tmp/statement" \
      -sigfile "$tmp/sig" >/dev/null 2>&1 ||
    die "signature mismatch for $file: it is not signed by the key given with --signing-key
  ($signing_key). The file or the control plane's answers were tampered with; nothing was
  installed."
  mkdir "$tmp/unpack"
  tar -xzf "$tmp/$file" -C "$tmp/unpack" || die "cannot unpack $file"
  unpacked="$tmp/unpack/relayctl-agent-$version"
  [ -x "$unpacked/bin/relayctl-agent" ] && [ -x "$unpacked/node/bin/node" ] ||
    die "$file does not hold a relayctl-agent-$version/ with its launcher and Node.js"
  printf '%s\n' "$expected" >"$unpacked/.relayctl-sha256"

  mkdir_tracked "$opt"
  if [ -e "$dest" ]; then
    # The same version built again (another checksum): the old copy goes back on failure.
    mv "$dest" "$dest.relayctl-old"
    printf '%s\n' "$dest" >>"$tmp/moved"
  fi
  mv "$unpacked" "$dest"
  printf '%s\n' "$dest" >>"$tmp/created"
  unpacked_new=yes
  # The bundled Node.js must start here (an official build needs glibc 2.28+): checked with the
  # agent's own launcher before anything else is done, from $dest since /tmp may be noexec.
  "$dest/bin/relayctl-agent" --version >"$tmp/version.out" 2>&1 || {
    tail -n 5 "$tmp/version.out" >&2
    die "the Node.js 24 in $file does not run on this machine (above; it needs glibc 2.28 or
  newer, e.g. Debian 10+, Ubuntu 20.04+, RHEL 8+): nothing was installed"
  }
fi

# ---------------------------------------------------------------- the unit (written last)
cat >"$tmp/unit" <<EOF
# relayctl-agent, written by the control plane's install.sh (agent $version).
# Run install.sh again to upgrade; change settings in $etc/agent.env or with a
# drop-in (systemctl edit relayctl-agent), not here.
[Unit]
Description=relayctl runner agent
Documentation=https://github.com/relayctl/relayctl#agent-on-another-server
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=$user
Group=$user
Environment=RELAYCTL_AGENT_STATE_DIR=$state
EnvironmentFile=-$etc/agent.env
ExecStart=$opt/current/bin/relayctl-agent run
Restart=always
RestartSec=2
# The agent kills a command's process tree at its deadline; stopping the unit
# must not leave commands behind either.
KillMode=control-group
TimeoutStopSec=30
UMask=0077

# Hardening. The agent exists to run operators' commands and containers, so only
# what leaves that working is on:
NoNewPrivileges=yes
ProtectSystem=full
ProtectHome=yes
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
LockPersonality=yes
SystemCallArchitectures=native
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
CapabilityBoundingSet=
# Left off on purpose:
#  MemoryDenyWriteExecute  Node's JIT needs writable+executable memory.
#  ProtectSystem=strict    commands and deployments write outside the state dir.
#  PrivateDevices          rootless podman needs /dev/fuse and /dev/net/tun.
#  PrivateUsers, RestrictNamespaces
#                          rootless podman and buildah need user namespaces.
#  SystemCallFilter        operators' commands and container runtimes need any syscall.
#  ProtectProc, ProcSubset commands like ps, top and free read all of /proc.
#  PrivateNetwork, IPAddressDeny
#                          the agent dials its gateway; commands use the network.
#  DynamicUser             the state dir and group memberships (docker) need a fixed user.
# NoNewPrivileges means commands cannot gain privileges (no sudo, no setuid):
# they run with $user's rights, plus the docker group when it exists.
# ProtectSystem=full keeps /etc read-only: with RELAYCTL_AGENT_PROXY=nginx add
# ReadWritePaths=/etc/nginx/conf.d in a drop-in (and give $user write access).

[Install]
WantedBy=multi-user.target
EOF

# ---------------------------------------------------------------- user and enrollment
if [ -z "$prefix" ] && ! id -u "$user" >/dev/null 2>&1; then
  say "creating system user $user"
  nologin=$(command -v nologin 2>/dev/null || echo /usr/sbin/nologin)
  useradd --system --user-group --home-dir "$state" --no-create-home --shell "$nologin" "$user"
  printf 'user:%s\n' "$user" >>"$tmp/created"
  if getent group docker >/dev/null 2>&1; then
    usermod -aG docker "$user"
    say "$user joined the docker group (docker access is root-equivalent)"
  fi
fi

mkdir_tracked "$state"
chmod 0700 "$state"
if [ -n "$token" ]; then
  say "enrolling with $base_url"
  "$dest/bin/relayctl-agent" enroll --url "$base_url" --token "$token" --state-dir "$state" >/dev/null ||
    die "enrollment failed (the agent says why above): nothing was installed. Make a new join token
  (relayctl-server admin create-join-token) and run this again."
elif [ ! -f "$state/agent.json" ]; then
  die "this server is not enrolled yet: pass --token rjt_... (relayctl-server admin create-join-token)"
else
  say "already enrolled; keeping the credential in $state/agent.json"
fi
[ -n "$prefix" ] || chown -R "$user:$user" "$state"

# ---------------------------------------------------------------- switch
mkdir_tracked "$etc"
if [ ! -f "$etc/agent.env" ]; then
  cat >"$etc/agent.env" <<'EOF'
# relayctl-agent settings (README "Agent on another server", docs/process-interfaces.md).
# Kept across upgrades. For example:
# RELAYCTL_AGENT_CONTAINER_ENGINE=docker
# RELAYCTL_AGENT_PROXY=caddy
EOF
fi
# What changed decides whether the agent restarts: a run with nothing new must not cut the
# commands it is running (stopping the unit kills them).
changed=no
if [ -n "$token" ] || [ "${unpacked_new:-no}" = yes ]; then changed=yes; fi
mkdir_tracked "$(dirname "$unit")"
if [ ! -f "$unit" ] || [ "$(cat "$unit")" != "$(cat "$tmp/unit")" ]; then
  mv "$tmp/unit" "$unit.tmp"
  chmod 0644 "$unit.tmp"
  mv "$unit.tmp" "$unit"
  changed=yes
fi
previous=$(readlink "$opt/current" 2>/dev/null || true)
if [ "$previous" != "$version" ]; then
  ln -s "$version" "$opt/.current.$$"
  # rename(2) replaces the old link in one step: `current` always points at a whole version
  # (-T: the link itself is replaced, not moved into the folder it points at).
  mv -T "$opt/.current.$$" "$opt/current"
  changed=yes
fi
done_ok=yes

if [ "$systemd" = yes ]; then
  systemctl daemon-reload
  systemctl enable relayctl-agent.service >/dev/null 2>&1
  if [ "$changed" = yes ]; then
    systemctl restart relayctl-agent.service
    say "relayctl-agent.service (re)started (journalctl -u relayctl-agent)"
  else
    systemctl start relayctl-agent.service
    say "nothing changed; relayctl-agent.service is running"
  fi
else
  say "unit written to $unit (--no-systemd: not started)"
fi

if [ "$previous" != "$version" ]; then
  # Keep this version and the one before it (to go back by hand); drop older ones.
  for d in "$opt"/*; do
    v=$(basename "$d")
    if [ ! -d "$d" ] || [ -L "$d" ]; then continue; fi
    [ "$v" = "$version" ] || [ "$v" = "$previous" ] || rm -rf "$d"
  done
fi
rm -rf "$dest.relayctl-old"
say "relayctl-agent $version installed in $opt/current"
