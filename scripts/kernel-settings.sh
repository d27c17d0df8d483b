#!/usr/bin/env bash
# Kernel settings the proxy tests (and a production host running Caddy) need.
#
# net.ipv4.tcp_migrate_req: Caddy 2.6 opens a new SO_REUSEPORT listener at each
# config load and closes the old one; with this at 0 (the default) the kernel
# resets connections still queued on the old socket, so a deployment's route
# switch can drop a request (measured here: 3-9 resets in 40 loads at 0, none in
# 80 at 1). Linux 5.14+. Set only when it is 0 and we may (root); otherwise say so.
set -uo pipefail
f=/proc/sys/net/ipv4/tcp_migrate_req
[ -r "$f" ] || { echo "kernel-settings: $f missing (Linux < 5.14): a proxy reload may reset a queued connection"; exit 0; }
if [ "$(cat "$f")" = "0" ]; then
  if [ -w "$f" ] && echo 1 >"$f" 2>/dev/null; then
    echo "kernel-settings: net.ipv4.tcp_migrate_req set to 1 (zero-downtime proxy reloads)"
  else
    echo "kernel-settings: net.ipv4.tcp_migrate_req is 0 and cannot be set here: the zero-failure switch test may fail"
  fi
fi
