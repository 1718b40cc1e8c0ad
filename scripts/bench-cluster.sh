#!/usr/bin/env bash
# bench-cluster.sh measures what running several replicas costs, each
# figure against its baseline in the same run (e2e/cluster_bench_test.go):
#
#   BenchmarkClusterHop          p50 of a call sent to its session's owner,
#                                and sent to another replica that forwards
#                                it (one hop), interleaved.
#   BenchmarkClusterPortableCPU  the gateways' CPU per call of portable
#                                sessions: one replica direct, one replica
#                                behind the round-robin proxy (the
#                                baseline), one replica serving sessions
#                                another opened (resumed), three replicas
#                                behind the proxy; raw, then with
#                                GOMAXPROCS=1 in every replica.
#
# It installs redis-server (scripts/redis.sh) if needed and builds the
# gateway without the race detector. BENCH_COUNT (default 3) repeats each
# benchmark; pipe the output to benchstat to compare runs.
#
# PROFILE=DIR profiles the replicas: the gateway is built with -tags pprof
# (cmd/mcpgate/pprof.go), and each phase of BenchmarkClusterPortableCPU
# leaves a CPU profile and an allocation profile of each replica in DIR
# (<phase>-<round>-r<replica>.pprof, .allocs) and its calls in
# DIR/calls.txt, to read per call: go tool pprof -top DIR/single-*-r*.pprof
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/redis.sh >/dev/null
if [ -n "${PROFILE:-}" ]; then
	mkdir -p "$PROFILE"
	export MCPGATE_PPROF_DIR="$(cd "$PROFILE" && pwd)"
	export MCPGATE_BIN="$MCPGATE_PPROF_DIR/mcpgate"
	go build -tags pprof -o "$MCPGATE_BIN" ./cmd/mcpgate
fi
go test -run '^$' -bench 'Cluster' -benchtime 1x -count "${BENCH_COUNT:-3}" ./e2e/ | grep -E '^(Benchmark|ok|FAIL|goos|goarch|pkg|cpu)'
