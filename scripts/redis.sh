#!/usr/bin/env bash
# redis.sh makes a redis-server available to the tests (testkit.Redis) and prints where it is.
#
#   redis-server on PATH      used as it is; nothing is installed.
#   otherwise                 Debian's redis-server package and the libraries it needs are
#                             fetched by name with `apt-get download` and unpacked with `dpkg -x`
#                             under the git-ignored .cache/redis; .cache/redis/bin/redis-server
#                             (and redis-cli) are wrappers that point the loader at the unpacked
#                             libraries. No root needed and nothing on the system changes.
#
# It is idempotent: a stamp keyed by the package names records the install, and a second run
# checks that the binary still runs and stops there. It never asks for input. The tests find the
# binary on PATH or at .cache/redis/bin/redis-server, relative to the module root.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.cache/redis"

say() { printf 'redis: %s\n' "$*" >&2; }
die() { printf 'redis: error: %s\n' "$*" >&2; exit 1; }

if found="$(command -v redis-server 2>/dev/null)"; then
	say "redis-server on PATH: $found ($("$found" --version | head -n1))"
	echo "$found"
	exit 0
fi

# The packages unpacked: the server, the tools package it depends on (redis-cli and the shared
# binary), and the libraries a minimal Debian image may lack. The rest of their dependencies
# (libc, libssl, libsystemd) are part of every Debian system that has apt-get.
packages=(redis-server redis-tools libjemalloc2 liblzf1 libatomic1)
stamp="$dest/.installed"
key="${packages[*]}"
wrapper="$dest/bin/redis-server"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$key" && -x "$wrapper" ]] && "$wrapper" --version >/dev/null 2>&1; then
	say "redis-server up to date ($wrapper)"
	echo "$wrapper"
	exit 0
fi

for tool in apt-get dpkg; do
	command -v "$tool" >/dev/null 2>&1 || die "redis-server is not on PATH and '$tool' is missing to fetch Debian's package; install redis-server"
done

say "fetching Debian's ${packages[*]} into $dest"
rm -rf "$dest"
mkdir -p "$dest/debs" "$dest/root" "$dest/bin"

# An image whose package lists were cleaned knows no package: read them once. apt-get update
# needs root; without it, say so instead of failing obscurely.
if ! apt-cache show redis-server >/dev/null 2>&1; then
	if [[ "$(id -u)" == 0 ]]; then
		say "package lists empty: apt-get update"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed"
	else
		die "apt knows no redis-server package and updating its lists needs root; run 'sudo apt-get update' or install redis-server"
	fi
fi

# apt-get download writes into the current directory; as root it drops privileges to the _apt
# user, which must be able to write there.
(cd "$dest/debs" && chmod 0777 . && apt-get download -qq "${packages[@]}" >/dev/null) ||
	die "apt-get download ${packages[*]} failed"
for deb in "$dest"/debs/*.deb; do
	dpkg -x "$deb" "$dest/root" || die "dpkg -x $deb failed"
done
rm -rf "$dest/debs"

server="$dest/root/usr/bin/redis-server"
[[ -e "$server" ]] || die "the packages unpacked but $server is missing"
libdirs=""
for d in "$dest"/root/usr/lib/*-linux-gnu "$dest"/root/lib/*-linux-gnu; do
	[[ -d "$d" ]] && libdirs="${libdirs:+$libdirs:}$d"
done

# The wrappers exec the binary, so the PID a caller starts is redis-server's own.
for name in redis-server redis-cli; do
	cat >"$dest/bin/$name" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$libdirs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$dest/root/usr/bin/$name" "\$@"
EOF
	chmod +x "$dest/bin/$name"
done

"$wrapper" --version >/dev/null 2>&1 || die "$wrapper does not run: $("$wrapper" --version 2>&1 | head -n3)"
echo "$key" >"$stamp"
say "installed $("$wrapper" --version | head -n1)"
echo "$wrapper"
