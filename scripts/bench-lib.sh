# bench-lib.sh holds the helpers of scripts/bench.sh, which sources it:
# starting and stopping the servers measured, running one `mcpgate bench`,
# reading its JSON, and the markdown tables. Everything here works on the
# globals bench.sh sets (dir, gate, echo_bin, node, supergateway, the
# BENCH_* settings) and on its tables:
#
#   result[KEY]  the JSON of one measured run ("" if it printed none)
#   note[KEY]    why a run failed, when it did
#   skipped[MODE/VERSION]  why a mode's throughput rows of a version were
#                not run
#   pids         processes bench.sh started, stopped by pid on exit
#
# KEYs are tp/MODE/VERSION/SESSIONS (throughput), pl/MODE/SIZE/SESSIONS
# (payload) and op/MODE (session startup).

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
# one measuring it would leave on.
start_supergateway() {
	local port=$sg_port log=$dir/supergateway.log
	while listening "$port"; do
		port=$((port + 1))
		((port < sg_port + 20)) || { say "no free port in $sg_port-$((sg_port + 19)) for supergateway"; return 1; }
	done
	: >"$log"
	"$node" "$supergateway" --stdio "$echo_bin" --outputTransport streamableHttp --stateful \
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

# gateway_config NAME ISOLATION [MAXPROCESSES [PREWARM]]: write a gateway
# config serving mcpecho as "echo" to $dir/gateway-NAME.json and print its
# path. maxSessions leaves room for the idle-memory run.
gateway_config() {
	local file=$dir/gateway-$1.json extra=""
	[[ -n ${3:-} ]] && extra+=", \"maxProcesses\": $3"
	[[ -n ${4:-} ]] && extra+=", \"prewarm\": $4"
	cat >"$file" <<JSON
{
  "mcpServers": {"echo": {"command": "$echo_bin", "isolation": "$2"$extra}},
  "gateway": {"maxSessions": $((idle + 1000)), "logLevel": "info"}
}
JSON
	echo "$file"
}

# --- measuring --------------------------------------------------------------

# measure KIND KEY URL ARGS...: one `mcpgate bench --url URL --json ARGS`
# run; its JSON goes to result[KEY], and if it fails, why to note[KEY]. A
# failed run of ours (KIND ours: the baseline or the gateway) fails the
# script; a peer's (KIND peer) is only reported in its row.
measure() {
	local kind=$1 key=$2 url=$3 code=0 err=$dir/bench-last.err
	shift 3
	say "$key: ${*}"
	result[$key]=$("$gate" bench --url "$url" --json "$@" 2>"$err") || code=$?
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

# --- tables ------------------------------------------------------------------

# notes KEY...: a list item for each run that failed or had errors or
# crossed replies, with its first error, so that no error goes unexplained.
notes() {
	local k r e x
	for k in "$@"; do
		r=${result[$k]:-}
		e=$(field errors "$r") x=$(field crossed "$r")
		if ((${e:-0} + ${x:-0} > 0)); then
			echo "- $(label "$k"): $e errors, $x crossed; first: \`$(first_error "$r" | tr '`' "'")\`"
		fi
		if [[ -n ${note[$k]:-} ]]; then
			echo "- $(label "$k"): \`$(tr '`' "'" <<<"${note[$k]}")\`"
		fi
	done
	return 0
}

throughput_table() {
	echo "| mode | version | sessions | calls/s | p50 µs | p99 µs | calls/s vs baseline | p50 vs baseline | errors | crossed |"
	echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	local v n mode keys=()
	for v in $versions; do
		for n in $sessions_list; do
			local base=${result[tp/baseline/$v/$n]:-}
			for mode in $throughput_modes; do
				local k=tp/$mode/$v/$n
				local r=${result[$k]:-}
				[[ -n $r || -n ${note[$k]:-} ]] || continue # not run
				keys+=("$k")
				if [[ -z $(field calls_per_sec "$r") ]]; then
					echo "| $mode | $v | $n | failed | | | | | | |"
					continue
				fi
				awk -v m="$mode" -v ver="$v" -v n="$n" -v c="$(field calls_per_sec "$r")" \
					-v p="$(field p50_us "$r")" -v q="$(field p99_us "$r")" \
					-v bc="$(field calls_per_sec "$base")" -v bp="$(field p50_us "$base")" \
					-v e="$(field errors "$r")" -v x="$(field crossed "$r")" 'BEGIN {
					ratio = (bc > 0) ? sprintf("%.2f", c / bc) : "-"
					delta = (bp != "") ? sprintf("%+.0f µs", p - bp) : "-"
					printf "| %s | %s | %d | %.0f | %.0f | %.0f | %s | %s | %d | %d |\n", m, ver, n, c, p, q, ratio, delta, e, x
				}'
			done
		done
	done
	echo
	notes "${keys[@]}"
	for v in $versions; do
		for mode in $throughput_modes; do
			[[ -n ${skipped[$mode/$v]:-} ]] && echo "- $mode, $v: ${skipped[$mode/$v]}"
		done
	done
	return 0
}

payload_table() {
	echo "| mode | size | sessions | calls/s | MB/s each way | p50 µs | p99 µs | MB/s vs baseline | errors | crossed |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	local s n mode keys=()
	for s in $sizes; do
		for n in $size_sessions; do
			local base=${result[pl/baseline/$s/$n]:-}
			for mode in $payload_modes; do
				local k=pl/$mode/$s/$n
				local r=${result[$k]:-}
				[[ -n $r || -n ${note[$k]:-} ]] || continue
				keys+=("$k")
				if [[ -z $(field calls_per_sec "$r") ]]; then
					echo "| $mode | $(size_name "$s") | $n | failed | | | | | | |"
					continue
				fi
				awk -v m="$mode" -v s="$(size_name "$s")" -v n="$n" -v c="$(field calls_per_sec "$r")" \
					-v mb="$(field mb_per_sec "$r")" -v p="$(field p50_us "$r")" -v q="$(field p99_us "$r")" \
					-v bmb="$(field mb_per_sec "$base")" -v e="$(field errors "$r")" -v x="$(field crossed "$r")" 'BEGIN {
					ratio = (bmb > 0) ? sprintf("%.2f", mb / bmb) : "-"
					printf "| %s | %s | %d | %.0f | %.1f | %.0f | %.0f | %s | %d | %d |\n", m, s, n, c, mb, p, q, ratio, e, x
				}'
			done
		done
	done
	echo
	notes "${keys[@]}"
}

startup_table() {
	echo "| mode | prewarm | sessions opened | open p50 ms | open p99 ms | errors | crossed |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
	local row mode pw k r keys=()
	for row in "shared -" "session 0" "session-prewarm $prewarm" "supergateway -"; do
		read -r mode pw <<<"$row"
		k=op/$mode
		r=${result[$k]:-}
		[[ -n $r || -n ${note[$k]:-} ]] || continue
		keys+=("$k")
		if [[ -z $(field opened "$r") ]]; then
			echo "| ${mode%-prewarm} | $pw | failed | | | | |"
			continue
		fi
		awk -v m="${mode%-prewarm}" -v pw="$pw" -v o="$(field opened "$r")" -v p="$(field open_p50_us "$r")" \
			-v q="$(field open_p99_us "$r")" -v e="$(field errors "$r")" -v x="$(field crossed "$r")" 'BEGIN {
			printf "| %s | %s | %d | %.2f | %.2f | %d | %d |\n", m, pw, o, p / 1000, q / 1000, e, x
		}'
	done
	echo
	notes "${keys[@]}"
}

memory_table() {
	echo "| sessions | with GET stream | opened | failed | streams opened | RSS before | RSS holding | KiB per session |"
	echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	awk -v n="$idle" -v s="$streams" -v o="$(field opened "$mem_json")" -v f="$(field failed "$mem_json")" \
		-v so="$(field streams "$mem_json")" -v b="$mem_before" -v h="$mem_held" 'BEGIN {
		printf "| %d | %d | %s | %s | %s | %d KiB | %d KiB | %.1f |\n", n, s, o, f, so, b, h, (h - b) / n
	}'
}

# --- targets -----------------------------------------------------------------

# compare KEY_A KEY_B FIELD: print "A B" (FIELD of each run) if both runs
# measured it; return 1 otherwise.
compare() {
	local a b
	a=$(field "$3" "${result[$1]:-}") b=$(field "$3" "${result[$2]:-}")
	[[ -n $a && -n $b ]] || return 1
	echo "$a $b"
}

# target TEXT MEASURED MET: one row of the targets table; an empty
# MEASURED means a run it needs is missing or failed.
target() {
	if [[ -z $2 ]]; then
		echo "| $1 | not measured | not measured |"
	else
		echo "| $1 | $2 | $3 |"
	fi
}

# targets_table: the issue's performance targets, judged on this run.
targets_table() {
	local v=2025-11-25 m=() line n
	echo "| target | measured | met |"
	echo "| --- | --- | --- |"

	if read -r -a m < <(compare "tp/shared/$v/32" "tp/baseline/$v/32" calls_per_sec); then
		line=$(awk -v a="${m[0]}" -v b="${m[1]}" 'BEGIN { r = a / b; printf "%.2f (%.0f vs %.0f calls/s)\t%s", r, a, b, (r >= 0.8 ? "yes" : "no") }')
	else line=""; fi
	target "shared, 32 sessions, $v: calls/s ≥ 0.8 × baseline" "${line%$'\t'*}" "${line#*$'\t'}"

	if read -r -a m < <(compare "tp/shared/$v/32" "tp/supergateway/$v/32" calls_per_sec); then
		local e
		e=$(field errors "${result[tp/supergateway/$v/32]}")
		line=$(awk -v a="${m[0]}" -v b="${m[1]}" -v e="$e" 'BEGIN {
			r = (b > 0) ? a / b : 0
			printf "%.2fx (%.0f vs %.0f calls/s%s)\t%s", r, a, b, (e > 0 ? sprintf("; supergateway had %d errors", e) : ""), (b > 0 && r >= 1.5 ? "yes" : "no") }')
	else line=""; fi
	target "shared vs supergateway, 32 sessions, $v: ≥ 1.5x calls/s" "${line%$'\t'*}" "${line#*$'\t'}"

	if read -r -a m < <(compare "tp/shared/$v/1" "tp/baseline/$v/1" p50_us); then
		line=$(awk -v a="${m[0]}" -v b="${m[1]}" 'BEGIN { d = a - b; printf "%+.0f µs (%.0f vs %.0f µs)\t%s", d, a, b, (d <= 50 ? "yes" : "no") }')
	else line=""; fi
	target "1 session, $v: shared p50 − baseline p50 ≤ 50 µs" "${line%$'\t'*}" "${line#*$'\t'}"

	for n in 1 8; do
		if read -r -a m < <(compare "pl/shared/1048576/$n" "pl/baseline/1048576/$n" mb_per_sec); then
			line=$(awk -v a="${m[0]}" -v b="${m[1]}" 'BEGIN { r = a / b; printf "%.2f (%.1f vs %.1f MB/s)\t%s", r, a, b, (r >= 0.8 ? "yes" : "no") }')
		else line=""; fi
		target "1 MiB messages, $n session$([[ $n == 1 ]] || echo s), $v: shared MB/s ≥ 0.8 × baseline" "${line%$'\t'*}" "${line#*$'\t'}"
	done

	if [[ $mem_ok == 1 ]]; then
		line=$(awk -v n="$idle" -v b="$mem_before" -v h="$mem_held" 'BEGIN { k = (h - b) / n; printf "%.1f KiB\t%s", k, (k <= 8 ? "yes" : "no") }')
	else line=""; fi
	target "idle memory at $idle sessions: ≤ 8 KiB per session" "${line%$'\t'*}" "${line#*$'\t'}"

	# Every run of the gateway: throughput, payload and startup rows, and
	# the idle run's sessions.
	local k runs=0 bad=0 errs=0 crossed=0
	for k in "${!result[@]}"; do
		[[ $k =~ ^(tp|pl|op)/(shared|session|session-prewarm)(/|$) ]] || continue
		runs=$((runs + 1))
		if [[ -z $(field errors "${result[$k]}") ]]; then
			bad=$((bad + 1))
			continue
		fi
		errs=$((errs + $(field errors "${result[$k]}")))
		crossed=$((crossed + $(field crossed "${result[$k]}")))
	done
	local idle_failed
	idle_failed=$(field failed "$mem_json")
	errs=$((errs + ${idle_failed:-0}))
	[[ $mem_ok == 1 ]] || bad=$((bad + 1))
	line="$errs errors, $crossed crossed in $runs runs and the idle run$( ((bad == 0)) || echo "; $bad run(s) failed")"
	target "the gateway's rows: zero errors and zero crossed" "$line" "$( ((errs + crossed + bad == 0)) && echo yes || echo no)"
}
