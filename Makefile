# The two commands: `make dev` runs the product, `make test` runs the tests.
# Both install what they need (npm ci; Debian packages through apt-get when missing).
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Node.js 24 LTS: the node on PATH when it is 24 or newer, else one fetched from the npm registry
# into .tools/ once and reused (scripts/node-runtime.sh says how). Every target below runs with it
# first on PATH, so npm, npx and the scripts all run on Node 24; node-gyp builds against its headers.
ifneq ($(filter-out help,$(or $(MAKECMDGOALS),help)),)
NODE_BIN := $(shell bash scripts/node-runtime.sh)
ifneq ($(.SHELLSTATUS),0)
$(error Node.js 24 is needed and could not be fetched (the lines above say why))
endif
ifneq ($(NODE_BIN),)
export PATH := $(NODE_BIN):$(PATH)
export npm_config_nodedir := $(patsubst %/bin,%,$(NODE_BIN))
endif
endif
NODE_MAJOR := $(shell PATH="$(PATH)" node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
# The stamp names the Node major: node_modules installed under another Node is installed again.
NPM_STAMP := node_modules/.relayctl-ci-stamp-node$(NODE_MAJOR)

help:
	@echo "make dev          run control plane + a local agent (SQLite, in-process bus)"
	@echo "make hello        deploy the sample application (examples/hello) on the running make dev"
	@echo "make test         lint, proto-check, build and run every test (real NATS + MariaDB)"
	@echo "make bench        run the benchmarks under bench/ (not part of make test)"
	@echo "make proto        regenerate proto/gen from proto/agent/v1/agent.proto"
	@echo "make proto-check  fail when proto/gen is stale"
	@echo "make action       bundle the deploy-sync action into action/dist (committed)"
	@echo "make action-check fail when action/dist is stale"

# npm ci only when the lockfile changed since the last install (or under another Node major).
# Nothing is compiled: SQLite is Node's own (node:sqlite) and node-pty comes prebuilt.
$(NPM_STAMP): package-lock.json
	npm ci --no-audit --no-fund
	@touch $(NPM_STAMP)

node-deps: $(NPM_STAMP)

# Debian packages the test harness runs as throwaway servers (and chromium, the dashboard tests' browser).
system-deps:
	@bash scripts/system-deps.sh nats-server mariadb-server docker-registry apache2-utils caddy nginx \
		podman runc catatonit busybox-static systemd chromium openssh-server openssh-client

# The agent bundles the control plane serves to install.sh (agent/dist/bundles), from agent/dist;
# the single-file CLI it serves under /cli/ (cli/dist/bundles);
# the dashboard's pages (web/) are bundled by esbuild into web/dist, served under /app/.
build: node-deps
	npx tsc -b
	node scripts/agent-bundle.mjs
	node scripts/cli-bundle.mjs
	npm run --silent build -w @relayctl/web

proto: node-deps
	cd proto && rm -rf gen && ../node_modules/.bin/buf generate
	npx biome format --write proto/gen >/dev/null

proto-check: node-deps
	@bash scripts/proto-check.sh

action: node-deps
	bash scripts/action-bundle.sh

action-check: node-deps
	@bash scripts/action-check.sh

lint: node-deps
	npx biome check .

# What dev runs besides Node, installed on Debian the way `make test` does: podman + runc (crun
# fails on rlimits here; dev's own containers.conf picks runc), catatonit (podman's --init, so a
# stop is quick), busybox-static (the sample's base image is built locally: nothing is pulled)
# and caddy (the dev proxy that gives each app http://<app>.localhost:8000). Where apt-get is
# absent (or the install fails) dev still starts and says what it lacks (docs/dev.md).
DEV_DEBS := podman runc catatonit busybox-static caddy

dev-deps:
	@if command -v apt-get >/dev/null 2>&1; then \
		bash scripts/system-deps.sh $(DEV_DEBS) || echo "[dev] could not install $(DEV_DEBS); starting without what is missing"; \
	else echo "[dev] no apt-get: install podman (or docker) and caddy yourself for deploys with a URL; starting anyway"; fi

# dev transpiles only what it runs (esbuild, about a second; scripts/dev-build.mjs):
# type checks are `make build`'s and `make test`'s. The dashboard (web/) is esbuild too, without
# its tsc pass (web's `npm run build`), which took 10-20 s of a first `make dev`.
dev: node-deps dev-deps
	@node scripts/dev-build.mjs
	@node web/build.mjs
	node scripts/dev.mjs

# The sample application (examples/hello), created if missing and deployed on the running
# `make dev` (scripts/dev-hello.mjs reads its keys from .relayctl/dev.json); prints its URL.
hello: node-deps
	@node scripts/dev-hello.mjs

# Test files are not part of the build; type-check them on their own. The action
# is bundled by esbuild, not built by tsc -b: type-check it on its own too.
typecheck-tests: node-deps
	npx tsc -p tsconfig.test.json
	npx tsc -p action

# Host settings the proxy tests need (scripts/kernel-settings.sh says why).
kernel-settings:
	@bash scripts/kernel-settings.sh

test: system-deps kernel-settings node-deps proto-check action-check lint build typecheck-tests
	node scripts/test-run.mjs

bench: system-deps kernel-settings node-deps build
	node bench/exec-latency.mjs
	node bench/exec-throughput.mjs
	bash -c 'ulimit -n 65536 2>/dev/null; node bench/agent-fanin.mjs'
	node bench/route-sync.mjs
	node bench/deploy.mjs
	node bench/fleet-rollout.mjs
	node bench/quickstart.mjs

.PHONY: hello help node-deps system-deps dev-deps kernel-settings build proto proto-check action action-check lint typecheck-tests dev test bench
