#!/usr/bin/env bash
# The baseline of bench/deploy.mjs: the steps of relayctl's deployment pipeline as the plain
# script a person would write on the server: fetch the branch into a cache repository, export
# the commit, build the image, run it beside the old one on a new host port, poll it until it
# answers (every 0.2 s, as the agent does), then point Caddy at it with one /load of the whole
# config. Prints "mark <step> <epoch ms>" after each step. Settings come from the environment
# (set by deploy.mjs): REPO CACHE IMAGE NAME PORT CADDY_ADMIN_PORT CADDY_HTTP_PORT FQDN.
set -euo pipefail
mark() { echo "mark $1 $(date +%s%3N)"; }

mark begin
git -C "$CACHE" fetch -q "$REPO" "+refs/heads/main:refs/heads/main"
sha=$(git -C "$CACHE" rev-parse main)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
git -C "$CACHE" archive "$sha" | tar -x -C "$ctx"
mark fetch

podman build -q -t "$IMAGE:${sha:0:12}" "$ctx" >/dev/null
mark build

podman run -d --init --name "$NAME" -p "127.0.0.1:$PORT:8080" "$IMAGE:${sha:0:12}" >/dev/null
mark start

until curl -fs -o /dev/null "http://127.0.0.1:$PORT/"; do sleep 0.2; done
mark health_check

# /load replaces the whole config, the admin listener included: keep it where it is.
route="{\"match\":[{\"host\":[\"$FQDN\"]}],\"handle\":[{\"handler\":\"reverse_proxy\",\"upstreams\":[{\"dial\":\"127.0.0.1:$PORT\"}]}]}"
server="{\"listen\":[\"127.0.0.1:$CADDY_HTTP_PORT\"],\"routes\":[$route],\"automatic_https\":{\"disable\":true}}"
config="{\"admin\":{\"listen\":\"127.0.0.1:$CADDY_ADMIN_PORT\"},\"apps\":{\"http\":{\"servers\":{\"baseline\":$server}}}}"
curl -fs -X POST -H "content-type: application/json" --data "$config" "http://127.0.0.1:$CADDY_ADMIN_PORT/load"
mark switch
