#!/usr/bin/env bash
# bench-compare.sh measures this tree's gateway against the gateway built
# from another git revision, in the same run, and prints a markdown table
# of ratios: calls per second and the gateway process's CPU time per call.
#
#   scripts/bench-compare.sh REV      (e.g. scripts/bench-compare.sh main~5)
#
# Both gateways serve the same `mcpecho` (built from this tree) over stdio
# in shared mode, and the same load tool (`mcpgate bench` of this tree)
# drives them, so only the gateway differs. The two are measured in
# alternation (old first in odd rounds, new first in even ones),
# BENCH_ROUNDS times each, and each row reports the median of the rounds:
# a machine that gets busier during the run slows both alike.
# A direct connection to `mcpecho --http` is measured in every round too,
# as the limit.
#
# Environment (defaults in brackets):
#   BENCH_DURATION [5s]  each measured run (no warmup: the CPU time is read
#                        around the whole run)
#   BENCH_ROUNDS [4]     alternations of old and new
#   BENCH_SESSIONS ["1 32"], BENCH_VERSIONS ["2025-11-25 2026-07-28"]
#   BENCH_DIR [.cache/bench-compare]   builds and logs
#
# CPU per call is (utime+stime of the gateway process, from /proc, after
# the run minus before) / calls answered; it includes opening the
# sessions. All traffic stays on 127.0.0.1; every wait is bounded; only
# processes this script started are stopped, by pid.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [[ $# -ne 1 ]]; then
	echo "usage: scripts/bench-compare.sh REV" >&2
	exit 2
fi
rev=$(git rev-parse --verify "$1^{commit}")
duration=${BENCH_DURATION:-5s}
rounds=${BENCH_ROUNDS:-4}
sessions_list=${BENCH_SESSIONS:-1 32}
versions=${BENCH_VERSIONS:-2025-11-25 2026-07-28}
dir=${BENCH_DIR:-$root/.cache/bench-compare}
mkdir -p "$dir"
# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh # say, start, stop, field

say "building this tree and ${rev:0:12} into $dir"
go build -o "$dir/mcpgate-new" ./cmd/mcpgate
go build -o "$dir/mcpecho" ./cmd/mcpecho
src=$dir/src-${rev:0:12}
if [[ ! -x $dir/mcpgate-${rev:0:12} ]]; then
	rm -rf "$src" && mkdir -p "$src"
	git archive "$rev" | tar -x -C "$src"
	(cd "$src" && go build -o "$dir/mcpgate-${rev:0:12}" ./cmd/mcpgate)
	rm -rf "$src"
fi
old=$dir/mcpgate-${rev:0:12}
new=$dir/mcpgate-new
load=$new

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# cpu_ticks PID: user+system clock ticks of PID so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

cat >"$dir/gateway.json" <<JSON
{"mcpServers": {"echo": {"command": "$dir/mcpecho"}}, "gateway": {"logLevel": "info"}}
JSON
tck=$(getconf CLK_TCK)
declare -A calls cpu
# run KIND ROUND: measure every row against KIND (old, new or direct).
run() {
	local kind=$1 r=$2 url
	case $kind in
	direct) start "direct" "$dir/mcpecho" --http 127.0.0.1:0; url="http://$ADDR/mcp" ;;
	*)
		local bin=$new
		[[ $kind == old ]] && bin=$old
		start "$kind" "$bin" serve --config "$dir/gateway.json" --listen 127.0.0.1:0
		url="http://$ADDR/servers/echo/mcp"
		;;
	esac
	local pid=$PID v n
	for v in $versions; do
		for n in $sessions_list; do
			local before after out
			before=$(cpu_ticks "$pid")
			out=$("$load" bench --url "$url" --json --sessions "$n" --concurrency 1 --duration "$duration" --warmup 0s --version "$v" 2>>"$dir/load.log") || say "$kind $v/$n failed: see $dir/load.log"
			after=$(cpu_ticks "$pid")
			calls[$kind/$v/$n/$r]=$(field calls_per_sec "$out")
			local c
			c=$(field calls "$out")
			cpu[$kind/$v/$n/$r]=$(awk -v d=$((after - before)) -v t="$tck" -v c="${c:-0}" 'BEGIN { if (c > 0) printf "%.1f", d / t / c * 1e6; else print "" }')
			say "round $r $kind $v $n sessions: ${calls[$kind/$v/$n/$r]:-?} calls/s, ${cpu[$kind/$v/$n/$r]:-?} µs CPU/call"
		done
	done
	stop "$pid"
}
# The order alternates (old first in odd rounds, new first in even ones),
# so that a machine whose speed drifts during the run favours neither.
for r in $(seq "$rounds"); do
	if ((r % 2)); then
		run old "$r"
		run new "$r"
	else
		run new "$r"
		run old "$r"
	fi
	run direct "$r"
done

# median KIND KEY ARRAY: the median over the rounds.
median() {
	local -n a=$3
	local r vals=()
	for r in $(seq "$rounds"); do vals+=("${a[$1/$2/$r]:-}"); done
	printf '%s\n' "${vals[@]}" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END { if (NR) print v[int((NR+1)/2)] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b > 0) printf "%.2f", a / b; else print "-" }'; }

echo "Gateway at this tree (new) against ${rev:0:12} (old), shared mode, one mcpecho; median of $rounds alternating rounds of $duration; direct = mcpecho --http."
echo
echo "| version | sessions | old calls/s | new calls/s | new/old | direct calls/s | old CPU µs/call | new CPU µs/call | new/old |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for v in $versions; do
	for n in $sessions_list; do
		oc=$(median old "$v/$n" calls) nc=$(median new "$v/$n" calls) dc=$(median direct "$v/$n" calls)
		ou=$(median old "$v/$n" cpu) nu=$(median new "$v/$n" cpu)
		echo "| $v | $n | ${oc%.*} | ${nc%.*} | $(ratio "$nc" "$oc") | ${dc%.*} | $ou | $nu | $(ratio "$nu" "$ou") |"
	done
done
