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
#                                baseline), three replicas behind it.
#
# It installs redis-server (scripts/redis.sh) if needed and builds the
# gateway without the race detector. BENCH_COUNT (default 3) repeats each
# benchmark; pipe the output to benchstat to compare runs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/redis.sh >/dev/null
go test -run '^$' -bench 'Cluster' -benchtime 1x -count "${BENCH_COUNT:-3}" ./e2e/ | grep -E '^(Benchmark|ok|FAIL|goos|goarch|pkg|cpu)'
