# shellcheck shell=bash
# bench-lib.sh holds the helpers of scripts/bench.sh, which sources it:
# starting and stopping the servers measured, running one `mcpgate bench`,
# reading its JSON, and the markdown tables. Everything here works on the
# globals bench.sh sets (dir, gate, load, echo_bin, node, supergateway, the
# BENCH_* settings) and on its tables:
#
#   result[KEY]  the JSON of one measured run ("" if it printed none)
#   note[KEY]    why a run failed, when it did
#   skipped[MODE/VERSION]  why a mode's throughput rows of a version were
#                not run
#   pids         processes bench.sh started, stopped by pid on exit
#   proc         the pid whose CPU time per call runs measure (the server
#                or gateway being measured), "" for none
#
# KEYs are tp/MODE/VERSION/SESSIONS (throughput), pl/MODE/SIZE/SESSIONS
# (payload), pr/BURN/PROCESSES/VERSION (processes scaling),
# al/MODE/VERSION/ROUND (alternating rounds for the targets) and op/MODE (session
# startup). The tables and the targets are in scripts/bench-report.sh.

# say MESSAGE: progress on stderr, with the seconds since the script started.
say() { echo "bench: [${SECONDS}s] $*" >&2; }

# stateless VERSION: whether VERSION is of the stateless revision
# (2026-07-28 or later): no initialize, no session.
stateless() { [[ ! $1 < 2026-07-28 ]]; }

# skip_reason MODE VERSION: why MODE's throughput rows are not run for
# VERSION, "" if they are.
skip_reason() {
	stateless "$2" || return 0
	case $1 in
	streamed) echo "not run: \`--sse-replies\` does not apply to stateless requests (always one JSON body), so the rows would repeat the baseline's" ;;
	session) echo "not run: session mode refuses stateless requests by design (400, -32022: a process per session needs a session)" ;;
	esac
}

# --- processes --------------------------------------------------------------

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
	say "$name did not start; its log:"
	cat "$log" >&2
	exit 1
}

# stop PID: SIGTERM, then wait (the gateway and supergateway stop their
# children themselves).
stop() {
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# listening PORT: whether something accepts connections on 127.0.0.1:PORT.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_supergateway: start the supergateway peer in its stateful Streamable
# HTTP mode (one mcpecho child per session, like the gateway's session
# mode) on the first free port from $sg_port, and set PID and ADDR; return 1
# if it did not come up in 10 s. It takes a fixed port and prints nothing
# parseable with --logLevel none, so readiness is its port accepting.
# Logging is off because at "info" it logs every message in full, which no
# one measuring it would leave on. $sg_echo_args, if set, are added to
# mcpecho's command line.
start_supergateway() {
	local port=$sg_port log=$dir/supergateway.log
	while listening "$port"; do
		port=$((port + 1))
		((port < sg_port + 20)) || { say "no free port in $sg_port-$((sg_port + 19)) for supergateway"; return 1; }
	done
	: >"$log"
	"$node" "$supergateway" --stdio "$echo_bin${sg_echo_args:+ $sg_echo_args}" --outputTransport streamableHttp --stateful \
		--port "$port" --logLevel none >>"$log" 2>&1 &
	PID=$!
	pids+=("$PID")
	ADDR=127.0.0.1:$port
	for _ in $(seq 100); do
		kill -0 "$PID" 2>/dev/null || break
		listening "$port" && return 0
		sleep 0.1
	done
	say "supergateway did not start on port $port; its log:"
	tail -20 "$log" >&2
	stop "$PID"
	return 1
}

# children PID: the pids of PID's child processes.
children() {
	cat /proc/"$1"/task/*/children 2>/dev/null || pgrep -P "$1" || true
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# sample_child_rss PID FILE: until FILE.stop exists (60 s at most), keep in
# FILE the largest VmRSS (KiB) seen of any one mcpecho child of PID.
sample_child_rss() {
	local most=0 c r
	for _ in $(seq 600); do
		[[ -e $2.stop ]] && break
		for c in $(children "$1"); do
			[[ $(cat "/proc/$c/comm" 2>/dev/null) == mcpecho ]] || continue
			r=$(rss_kib "$c" 2>/dev/null) || continue
			((${r:-0} > most)) && most=$r
		done
		echo "$most" >"$2"
		sleep 0.1
	done
}

# gateway_config NAME ISOLATION [MEMBERS]: write a gateway config serving
# mcpecho as "echo" to $dir/gateway-NAME.json and print its path. MEMBERS
# are more JSON members of the server's entry, e.g. '"args": ["--scan"]'
# or '"maxProcesses": 72, "prewarm": 8'. maxSessions leaves room for the
# idle-memory run.
gateway_config() {
	local file=$dir/gateway-$1.json extra=""
	[[ -n ${3:-} ]] && extra=", $3"
	cat >"$file" <<JSON
{
  "mcpServers": {"echo": {"command": "$echo_bin", "isolation": "$2"$extra}},
  "gateway": {"maxSessions": $((idle + 1000)), "logLevel": "info"}
}
JSON
	echo "$file"
}

# processes_support GATE: "yes" if the gateway GATE accepts the key
# mcpServers.NAME.processes (it validates a config that sets it to 2),
# else "no: " and the line of its answer that says why (the key unknown to
# an older build). The probe config goes to $dir.
processes_support() {
	local file=$dir/processes-probe.json out
	printf '{"mcpServers": {"echo": {"command": "%s", "isolation": "shared", "processes": 2}}}\n' "${echo_bin:-mcpecho}" >"$file"
	if out=$("$1" validate --config "$file" 2>&1); then
		echo yes
	else
		echo "no: $( (grep -m1 processes <<<"$out" || head -1 <<<"$out") | sed "s|$file: ||")"
	fi
}

# --- measuring --------------------------------------------------------------

# measure KIND KEY URL ARGS...: one `mcpgate bench --url URL --json ARGS`
# run (with --proc $proc if proc is set); its JSON goes to result[KEY],
# and if it fails, why to note[KEY]. A
# failed run of ours (KIND ours: the baseline or the gateway) fails the
# script; a peer's (KIND peer) is only reported in its row.
measure() {
	local kind=$1 key=$2 url=$3 code=0 err=$dir/bench-last.err
	shift 3
	# The CPU of the process served (and its children) per call, but for
	# session startup runs, whose window holds no steady load.
	[[ -n ${proc:-} && $key != op/* ]] && set -- "$@" --proc "$proc"
	say "$key: ${*}"
	result[$key]=$("$load" bench --url "$url" --json "$@" 2>"$err") || code=$?
	cat "$err" >>"$dir/bench-client.log"
	if ((code != 0)); then
		local why
		why=$(sed -nE 's/^mcpgate bench: //p' "$err" | tail -1 | cut -c1-200)
		say "$key failed (exit $code): $why"
		[[ $kind == peer ]] || failed=1
		# Errors and crossed replies show in the row (and notes() cites the
		# first); anything else that failed the run is noted.
		local e x
		e=$(field errors "${result[$key]}") x=$(field crossed "${result[$key]}")
		if ((${e:-0} + ${x:-0} == 0)); then
			note[$key]=$why
		fi
	fi
}

# field NAME JSON: the number NAME in the JSON object, "" if absent.
field() { sed -nE "s/.*\"$1\":([-0-9.e+]+).*/\1/p" <<<"$2"; }

# first_error JSON: its first_error string ("" if none), on one line, with
# the escapes an HTML error page gets in JSON undone, cut at 160 characters.
first_error() {
	sed -nE 's/.*"first_error":"(([^"\\]|\\.)*)".*/\1/p' <<<"$1" |
		sed -E 's/\\u003c/</g; s/\\u003e/>/g; s/\\u0026/\&/g; s/\\[nrt]/ /g; s/\\"/"/g; s/  +/ /g' | cut -c1-160
}

# label KEY: a run's name for people: "shared, 2025-11-25, 32 sessions".
label() {
	local IFS=/
	read -r -a p <<<"$1"
	case ${p[0]} in
	tp) echo "${p[1]}, ${p[2]}, ${p[3]} session$( ((p[3] == 1)) || echo s)" ;;
	pl) echo "${p[1]}, $(size_name "${p[2]}"), ${p[3]} session$( ((p[3] == 1)) || echo s)" ;;
	pr) echo "processes: ${p[2]}, --burn ${p[1]}, ${p[3]}, 32 sessions" ;;
	al) echo "${p[1]}, ${p[2]}, 32 sessions, alternating round ${p[3]}" ;;
	*) echo "${p[1]/-prewarm/ with prewarm $prewarm}" ;;
	esac
}

# size_name BYTES: 65536 -> "64 KiB", 1048576 -> "1 MiB".
size_name() {
	awk -v b="$1" 'BEGIN {
		if (b >= 1048576 && b % 1048576 == 0) printf "%d MiB", b / 1048576
		else if (b >= 1024 && b % 1024 == 0) printf "%d KiB", b / 1024
		else printf "%d B", b }'
}

# stateless_line: the report's sentence on the stateless revision's rows
# (with a leading newline), if any version run is of it.
stateless_line() {
	local v
	for v in $versions; do
		stateless "$v" || continue
		printf '\n%s: no initialize and no session; each client opens with one server/discover, then\nevery call is a stateless tools/call (its _meta and headers, result "complete").' "$v"
		[[ -n ${shared_stateless:-} ]] && printf '\n%s' "$shared_stateless"
		((sg_ok)) && printf '\nsupergateway serves it with a fresh `mcpecho` per request.'
		return 0
	done
	return 0
}


# --- profiles ----------------------------------------------------------------

# secs DURATION: whole seconds in a duration such as 10s, 1500ms or 1m (at
# least 1).
secs() {
	awk -v d="$1" 'BEGIN {
		n = d + 0
		if (d ~ /ms$/) n /= 1000; else if (d ~ /m$/) n *= 60; else if (d ~ /h$/) n *= 3600
		n = int(n); print (n < 1 ? 1 : n) }'
}

# fetch URL FILE: save URL (a loopback profile endpoint) in FILE, with
# curl, else with go tool pprof (slower to start; its copies go to $pdir);
# failures are logged to $pdir/log and leave FILE empty.
fetch() {
	if command -v curl >/dev/null; then
		curl -sS --max-time 120 -o "$2" "$1" 2>>"$pdir/log" || : >"$2"
	else
		PPROF_TMPDIR=$pdir go tool pprof -proto "$1" >"$2" 2>>"$pdir/log" || : >"$2"
	fi
}

# profile KEY TITLE MEMBERS ARGS...: profile the gateway (shared mode, the
# -tags pprof build, MCPGATE_PPROF_DIR; MEMBERS are more of the server's
# config members, as gateway_config takes them) under `mcpgate bench ARGS`: the allocations profile is
# read before and after a CPU profile of the run's middle, and prof[KEY]
# gets a markdown summary headed TITLE: the top functions by cumulative
# and by own CPU, per call, and the allocations per call (objects and
# bytes between the two allocation snapshots, divided by the calls made
# in between: the run's calls/s times the time between).
profile() {
	local key=$1 title=$2 members=$3 pdir=$dir/pprof-$1 secs_run secs_prof
	shift 3
	rm -rf "$pdir"
	mkdir -p "$pdir"
	secs_prof=$(secs "$duration")
	secs_run=$((secs_prof + 3))
	start "gateway-pprof-$key" env MCPGATE_PPROF_DIR="$pdir" "$dir/mcpgate-pprof" serve --config "$(gateway_config "pprof-$key" shared "$members")" --listen 127.0.0.1:0
	local gpid=$PID url=http://$ADDR/servers/echo/mcp paddr=""
	for _ in $(seq 50); do
		[[ -s $pdir/$gpid ]] && break
		sleep 0.1
	done
	paddr=$(cat "$pdir/$gpid" 2>/dev/null || true)
	if [[ -z $paddr ]]; then
		prof[$key]="**$title**: not profiled: the -tags pprof gateway wrote no profile address"
		stop "$gpid"
		return
	fi
	say "profile $key: $* for ${secs_run}s, CPU profile of ${secs_prof}s"
	"$load" bench --url "$url" --json "$@" --duration "${secs_run}s" --warmup 500ms \
		>"$pdir/bench.json" 2>>"$dir/bench-client.log" &
	local bpid=$!
	pids+=("$bpid")
	sleep 1.5 # the sessions open and warm up
	local t0 t1
	t0=$(date +%s.%N)
	fetch "http://$paddr/debug/pprof/allocs" "$pdir/allocs-0.pb.gz"
	fetch "http://$paddr/debug/pprof/profile?seconds=$secs_prof" "$pdir/cpu.pb.gz"
	fetch "http://$paddr/debug/pprof/allocs" "$pdir/allocs-1.pb.gz"
	t1=$(date +%s.%N)
	wait "$bpid" || true
	stop "$gpid"
	local rate
	rate=$(field calls_per_sec "$(cat "$pdir/bench.json")")
	if [[ -z $rate || ! -s $pdir/cpu.pb.gz || ! -s $pdir/allocs-1.pb.gz ]]; then
		prof[$key]="**$title**: not profiled: the load run or a profile failed (see $pdir/log)"
		return
	fi
	local calls_prof calls_alloc objects bytes base=(-base "$pdir/allocs-0.pb.gz" "$pdir/allocs-1.pb.gz")
	calls_prof=$(awk -v r="$rate" -v s="$secs_prof" 'BEGIN { printf "%.0f", r * s }')
	calls_alloc=$(awk -v r="$rate" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", r * (b - a) }')
	objects=$(go tool pprof -top -nodecount=1 -sample_index=alloc_objects "${base[@]}" 2>/dev/null |
		sed -nE 's/.* of ([0-9]+) total.*/\1/p')
	bytes=$(go tool pprof -top -nodecount=1 -unit=B -sample_index=alloc_space "${base[@]}" 2>/dev/null |
		sed -nE 's/.* of ([0-9.]+)B total.*/\1/p')
	local sites
	sites=$(go tool pprof -top -nodecount=6 -sample_index=alloc_objects "${base[@]}" 2>/dev/null |
		awk '$2 ~ /%$/ && $1 ~ /^[0-9]+$/ { f = $6; for (i = 7; i <= NF; i++) f = f " " $i; if (f ~ /^internal\//) f = f " (std)"; printf "%s`%s` %s", (n++ ? ", " : ""), f, $2 }')
	local total
	total=$(go tool pprof -top -nodecount=1 "$pdir/cpu.pb.gz" 2>/dev/null | sed -nE 's/.*Total samples = ([0-9.]+m?s).*/\1/p')
	prof[$key]=$(
		awk -v title="$title" -v r="$rate" -v c="$calls_prof" -v t="$total" -v o="${objects:-0}" -v b="${bytes:-0}" -v ca="$calls_alloc" -v s="$secs_prof" 'BEGIN {
			tt = t; u = 1; if (tt ~ /ms$/) { sub(/ms$/, "", tt); u = 1e-3 } else sub(/s$/, "", tt)
			printf "**%s**: %.0f calls/s while profiled for %ds; the gateway used %.1f µs of CPU per call in the profile", title, r, s, tt * u * 1e6 / c
			if (ca > 0) printf ", and allocated %.0f objects and %.1f KB per call", o / ca, b / ca / 1000
			printf ".\n" }'
		echo
		echo "| top by cumulative CPU | cum % | µs per call | | top by own CPU | flat % | µs per call |"
		echo "| --- | ---: | ---: | --- | --- | ---: | ---: |"
		paste -d'|' <(pprof_top "$pdir/cpu.pb.gz" "$calls_prof" -cum) <(pprof_top "$pdir/cpu.pb.gz" "$calls_prof") |
			sed -E 's/^/| /; s/$/ |/; s/\|/| |/4'
		echo
		echo "Most objects allocated by: $sites."
	)
}

# pprof_top PROFILE CALLS [-cum]: the 10 top functions of a CPU profile, by
# own CPU (or cumulative, with -cum), one "function | % | µs per call" a
# line.
pprof_top() {
	local col=1 pct=2
	[[ ${3:-} == -cum ]] && col=4 pct=5
	go tool pprof -top ${3:+"$3"} -nodecount=10 "$1" 2>/dev/null | awk -v c="$2" -v col="$col" -v pct="$pct" '
		$5 ~ /%$/ && $4 ~ /s$/ {
			v = $col; u = 1
			if (v ~ /ms$/) { sub(/ms$/, "", v); u = 1e-3 } else if (v ~ /[uµ]s$/) { sub(/[uµ]s$/, "", v); u = 1e-6 } else sub(/s$/, "", v)
			f = $6; for (i = 7; i <= NF; i++) f = f " " $i
			sub(/^github\.com\/mcpgate\/mcpgate\/internal\//, "", f)
			if (f ~ /^internal\//) f = f " (std)" # not a path of this repository
			printf " `%s` | %s | %.1f \n", f, $pct, v * u * 1e6 / c
		}'
}
