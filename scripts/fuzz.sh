#!/usr/bin/env bash
# fuzz.sh runs every Fuzz target in the module, one after another, each for FUZZTIME
# (default 20s). Go can fuzz only one target of one package per invocation, so the targets are
# discovered with `go test -list` package by package.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
fuzztime="${FUZZTIME:-20s}"

ran=0
# Only packages with test files can hold Fuzz targets.
for pkg in $(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do
	# A package that does not build must fail the run, not be skipped silently.
	list=$(go test -run '^$' -list '^Fuzz' "$pkg") || {
		printf 'fuzz: error: listing the Fuzz targets of %s failed\n' "$pkg" >&2
		exit 1
	}
	targets=$(grep '^Fuzz' <<<"$list" || true)
	for target in $targets; do
		printf 'fuzz: %s %s for %s\n' "$pkg" "$target" "$fuzztime" >&2
		# Minimizing each new input may take the whole default minute here
		# and stalls the run: a bounded number of tries keeps it fuzzing.
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 100x "$pkg"
		ran=$((ran + 1))
	done
done
printf 'fuzz: ran %d target(s)\n' "$ran" >&2
