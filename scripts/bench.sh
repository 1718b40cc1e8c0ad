#!/usr/bin/env bash
# bench.sh measures the gateway against its no-proxy baseline on this
# machine and prints a markdown table; with --write it also rewrites the
# generated part of docs/benchmarks.md (between the bench:begin/end markers).
#
#   scripts/bench.sh [--write]      (or: make bench)
#
# Environment: BENCH_DURATION (default 10s) and BENCH_WARMUP (1s) per run,
# BENCH_SESSIONS ("1 32 256"), BENCH_VERSIONS ("2025-11-25 2025-06-18"), BENCH_IDLE (10000 sessions) and
# BENCH_STREAMS (1000 of them with a GET stream), BENCH_DIR (build and log
# directory, default .cache/bench).
#
# Runs: (a) baseline, `mcpgate bench` straight at `mcpecho --http`, which
# answers every request with one JSON body (the limit); (b) streamed, the
# same with `--sse-replies` (for information); (c) the gateway in shared mode
# wrapping one `mcpecho` over stdio; (d) session mode, one `mcpecho` per
# session. Then the gateway's resident memory per idle
# session. All traffic stays on 127.0.0.1; every wait is bounded.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
write=0
case "${1:-}" in
--write) write=1 ;;
"") ;;
*) echo "usage: scripts/bench.sh [--write]" >&2; exit 2 ;;
esac
duration=${BENCH_DURATION:-10s}
warmup=${BENCH_WARMUP:-1s}
sessions_list=${BENCH_SESSIONS:-1 32 256}
versions=${BENCH_VERSIONS:-2025-11-25 2025-06-18}
idle=${BENCH_IDLE:-10000}
streams=${BENCH_STREAMS:-1000}
dir=${BENCH_DIR:-$root/.cache/bench}
mkdir -p "$dir"

# Each side holds thousands of sockets in the memory run.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

echo "bench: building into $dir" >&2
go build -o "$dir/mcpgate" ./cmd/mcpgate
go build -o "$dir/mcpecho" ./cmd/mcpecho
gate=$dir/mcpgate
echo_bin=$dir/mcpecho
if ! "$gate" bench --help >/dev/null 2>&1; then
	echo "bench: this mcpgate has no bench subcommand (cmd/mcpgate/cli.go must dispatch to bench)" >&2
	exit 1
fi

# Processes this script started, stopped by pid on exit.
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT

# start NAME CMD...: start a server logging to $dir/NAME.log, wait (10 s at
# most) for its "msg=listening addr=" line, and set PID and ADDR.
start() {
	local name=$1
	shift
	local log=$dir/$name.log
	: >"$log"
	"$@" 2>"$log" >/dev/null &
	PID=$!
	pids+=("$PID")
	for _ in $(seq 100); do
		ADDR=$(sed -nE 's/.*msg=listening addr=([^ ]+).*/\1/p' "$log" | head -1)
		[[ -n $ADDR ]] && return 0
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "bench: $name did not start; its log:" >&2
	cat "$log" >&2
	exit 1
}

# stop PID: SIGTERM, then wait (the gateway stops its children itself).
stop() {
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# config ISOLATION: write a gateway config serving mcpecho as "echo".
# Session mode runs one process per session: its cap (maxProcesses,
# default 64) is raised to the largest session count measured.
config() {
	local file=$dir/gateway-$1.json procs=""
	if [ "$1" = session ]; then
		local most=1 n
		for n in $sessions_list; do most=$((n > most ? n : most)); done
		procs=", \"maxProcesses\": $most"
	fi
	cat >"$file" <<JSON
{
  "mcpServers": {"echo": {"command": "$echo_bin", "isolation": "$1"$procs}},
  "gateway": {"maxSessions": $((idle + 1000)), "logLevel": "info"}
}
JSON
	echo "$file"
}

field() { sed -nE "s/.*\"$1\":([-0-9.e+]+).*/\1/p" <<<"$2"; }

failed=0
declare -A result
# run MODE SESSIONS URL: one measured run per protocol version; its JSON
# goes to result[MODE/VERSION/SESSIONS].
run() {
	local out code v
	for v in $versions; do
		code=0
		echo "bench: $1, $v, $2 sessions, $duration" >&2
		out=$("$gate" bench --url "$3" --sessions "$2" --version "$v" --duration "$duration" --warmup "$warmup" --json 2>>"$dir/bench-client.log") || code=$?
		if ((code != 0)); then
			echo "bench: $1 $v at $2 sessions failed (exit $code): $out" >&2
			failed=1
		fi
		result[$1/$v/$2]=$out
	done
}

# The baseline is the limit: the same echo tool served directly, every reply
# one JSON body. "streamed" is extra information: the same server answering
# with an SSE stream (priming event, then the reply), as a server that
# always streams would.
start mcpecho "$echo_bin" --http 127.0.0.1:0
for n in $sessions_list; do run baseline "$n" "http://$ADDR/mcp"; done
stop "$PID"
start mcpecho "$echo_bin" --http 127.0.0.1:0 --sse-replies
for n in $sessions_list; do run streamed "$n" "http://$ADDR/mcp"; done
stop "$PID"

for mode in shared session; do
	start "gateway-$mode" "$gate" serve --config "$(config "$mode")" --listen 127.0.0.1:0
	for n in $sessions_list; do run "$mode" "$n" "http://$ADDR/servers/echo/mcp"; done
	stop "$PID"
done

table() {
	echo "| mode | version | sessions | calls/s | p50 µs | p99 µs | calls/s vs baseline | p50 vs baseline | errors | crossed |"
	echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	local v n mode
	for v in $versions; do
		for n in $sessions_list; do
			local base=${result[baseline/$v/$n]}
			local bcps bp50
			bcps=$(field calls_per_sec "$base")
			bp50=$(field p50_us "$base")
			for mode in baseline streamed shared session; do
				local r=${result[$mode/$v/$n]}
				local cps p50 p99
				cps=$(field calls_per_sec "$r")
				p50=$(field p50_us "$r")
				p99=$(field p99_us "$r")
				if [[ -z $cps ]]; then
					echo "| $mode | $v | $n | failed | | | | | | |"
					continue
				fi
				awk -v m="$mode" -v ver="$v" -v n="$n" -v c="$cps" -v p="$p50" -v q="$p99" -v bc="$bcps" -v bp="$bp50" \
					-v e="$(field errors "$r")" -v x="$(field crossed "$r")" 'BEGIN {
					ratio = (bc > 0) ? sprintf("%.2f", c / bc) : "-"
					delta = (bp != "") ? sprintf("%+.0f µs", p - bp) : "-"
					printf "| %s | %s | %d | %.0f | %.0f | %.0f | %s | %s | %d | %d |\n", m, ver, n, c, p, q, ratio, delta, e, x
				}'
			done
		done
	done
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# Memory: idle sessions held on the gateway in shared mode.
memory() {
	start gateway-memory "$gate" serve --config "$(config shared)" --listen 127.0.0.1:0
	local gpid=$PID before held=0 log=$dir/bench-idle.log
	before=$(rss_kib "$gpid")
	: >"$log"
	"$gate" bench --url "http://$ADDR/servers/echo/mcp" --idle "$idle" --streams "$streams" --hold 600s --json \
		>"$dir/idle.json" 2>"$log" &
	local bpid=$!
	pids+=("$bpid")
	for _ in $(seq 3000); do # 300 s at most to open them all
		grep -q '^bench: holding' "$log" && break
		kill -0 "$bpid" 2>/dev/null || break
		sleep 0.1
	done
	if grep -q '^bench: holding' "$log"; then
		for _ in 1 2 3 4 5; do # the highest of five samples over two seconds
			local r
			r=$(rss_kib "$gpid")
			((r > held)) && held=$r
			sleep 0.5
		done
	fi
	kill -INT "$bpid" 2>/dev/null || true
	local code=0
	wait "$bpid" || code=$?
	stop "$gpid"
	local idle_json
	idle_json=$(cat "$dir/idle.json")
	if ((code != 0 || held == 0)); then
		echo "bench: idle run failed (exit $code): $idle_json" >&2
		tail -5 "$log" >&2
		failed=1
	fi
	echo "| sessions | with GET stream | opened | failed | streams opened | RSS before | RSS holding | KiB per session |"
	echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	awk -v n="$idle" -v s="$streams" -v o="$(field opened "$idle_json")" -v f="$(field failed "$idle_json")" \
		-v so="$(field streams "$idle_json")" -v b="$before" -v h="$held" 'BEGIN {
		printf "| %d | %d | %s | %s | %s | %d KiB | %d KiB | %.1f |\n", n, s, o, f, so, b, h, (h - b) / n
	}'
}

throughput=$(table)
mem=$(memory)
cmd="BENCH_DURATION=$duration scripts/bench.sh${1:+ $1}"
machine="$(nproc) cores, $(awk '/^MemTotal:/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -1), $(uname -sr), $(go version | cut -d' ' -f3)"
report=$(
	cat <<MD
Measured $(date -u +%Y-%m-%dT%H:%MZ) on $machine with \`$cmd\`
(each run: $warmup warmup, then $duration measured; one caller per session, each
with one call in flight; each protocol version's clients separately). baseline: \`mcpecho --http\` served directly,
every reply one JSON body (the limit); streamed: the same with \`--sse-replies\` (a priming
event, then the reply, on an SSE stream), for information.

$throughput

Memory of the gateway (shared mode) holding idle sessions, from VmRSS:

$mem
MD
)
echo "$report"

if ((write)); then
	doc=docs/benchmarks.md
	begin='<!-- bench:begin (generated by scripts/bench.sh --write) -->'
	end='<!-- bench:end -->'
	if [[ ! -f $doc ]] || ! grep -qF "$begin" "$doc"; then
		printf '# Benchmarks\n\n%s\n%s\n' "$begin" "$end" >"$doc"
	fi
	tmp=$(mktemp)
	awk -v b="$begin" -v e="$end" -v r="$report" '
		$0 == b { print; print r; skip = 1; next }
		$0 == e { skip = 0 }
		!skip { print }' "$doc" >"$tmp"
	mv "$tmp" "$doc"
	echo "bench: wrote $doc" >&2
fi
exit "$failed"
