# shellcheck shell=bash
# bench-report.sh holds the markdown tables and the targets of
# scripts/bench.sh, which sources it after scripts/bench-lib.sh: they read
# the run's tables (result, note, skipped) and settings.

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
	echo "| mode | size | sessions | calls/s | MB/s each way | p50 µs | p99 µs | MB/s vs baseline | CPU µs per call (process, children) | errors | crossed |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
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
					echo "| $mode | $(size_name "$s") | $n | failed | | | | | | | |"
					continue
				fi
				awk -v m="$mode" -v s="$(size_name "$s")" -v n="$n" -v c="$(field calls_per_sec "$r")" \
					-v mb="$(field mb_per_sec "$r")" -v p="$(field p50_us "$r")" -v q="$(field p99_us "$r")" \
					-v bmb="$(field mb_per_sec "$base")" -v e="$(field errors "$r")" -v x="$(field crossed "$r")" \
					-v cpu="$(field proc_cpu_us_per_call "$r")" -v ccpu="$(field proc_children_cpu_us_per_call "$r")" 'BEGIN {
					ratio = (bmb > 0) ? sprintf("%.2f", mb / bmb) : "-"
					u = (cpu != "") ? sprintf("%.0f, %.0f", cpu, ccpu) : "-"
					printf "| %s | %s | %d | %.0f | %.1f | %.0f | %.0f | %s | %s | %d | %d |\n", m, s, n, c, mb, p, q, ratio, u, e, x
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

# process_name MODE: what `--proc` measured in MODE's runs.
process_name() {
	case $1 in
	baseline | streamed) echo mcpecho ;;
	supergateway) echo "supergateway (node)" ;;
	*) echo gateway ;;
	esac
}

# cpu_table: CPU time and context switches per call, from the throughput
# runs, of the process served and of its children.
cpu_table() {
	echo "| mode | version | sessions | calls/s | process | its CPU µs per call | vs baseline | children | children's CPU µs per call | total µs per call | total vs baseline | switches per call | children's switches per call |"
	echo "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	local v n mode
	for v in $versions; do
		for n in $sessions_list; do
			local base=${result[tp/baseline/$v/$n]:-}
			for mode in $throughput_modes; do
				local r=${result[tp/$mode/$v/$n]:-}
				[[ -n $(field proc_cpu_us_per_call "$r") ]] || continue
				awk -v m="$mode" -v ver="$v" -v n="$n" -v pn="$(process_name "$mode")" -v c="$(field calls_per_sec "$r")" \
					-v u="$(field proc_cpu_us_per_call "$r")" -v k="$(field proc_children "$r")" \
					-v cu="$(field proc_children_cpu_us_per_call "$r")" -v s="$(field proc_switches_per_call "$r")" \
					-v cs="$(field proc_children_switches_per_call "$r")" -v bu="$(field proc_cpu_us_per_call "$base")" \
					-v bcu="$(field proc_children_cpu_us_per_call "$base")" 'BEGIN {
					r1 = (bu > 0) ? sprintf("%.2f", u / bu) : "-"
					r2 = (bu > 0) ? sprintf("%.2f", (u + cu) / (bu + bcu)) : "-"
					printf "| %s | %s | %d | %.0f | %s | %.1f | %s | %d | %.1f | %.1f | %s | %.2f | %.2f |\n", m, ver, n, c, pn, u, r1, k, cu, u + cu, r2, s, cs
				}'
			done
		done
	done
}

# processes_table: processes: 1 against processes: 2 with a CPU-bound
# child, or the line saying why they were not run.
processes_table() {
	if [[ $processes_ok != yes ]]; then
		echo "skipped: processes not supported by this build (\`mcpgate validate\` of a config with \`processes: 2\`: ${processes_ok#no: })"
		return 0
	fi
	echo "| child's burn | processes | version | sessions | calls/s | vs processes: 1 | at most (1/burn) | p50 µs | p99 µs | gateway CPU µs per call | children's CPU µs per call | errors | crossed |"
	echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	local b v np keys=()
	for b in $burns; do
		for v in $processes_versions; do
			local one=${result[pr/$b/1/$v]:-}
			for np in 1 2; do
				local k=pr/$b/$np/$v r=${result[pr/$b/$np/$v]:-}
				keys+=("$k")
				if [[ -z $(field calls_per_sec "$r") ]]; then
					echo "| $b | $np | $v | 32 | failed | | | | | | | | |"
					continue
				fi
				awk -v burn="$b" -v np="$np" -v ver="$v" -v c="$(field calls_per_sec "$r")" -v b="$(field calls_per_sec "$one")" \
					-v p="$(field p50_us "$r")" -v q="$(field p99_us "$r")" -v u="$(field proc_cpu_us_per_call "$r")" \
					-v cu="$(field proc_children_cpu_us_per_call "$r")" -v e="$(field errors "$r")" -v x="$(field crossed "$r")" 'BEGIN {
					s = burn + 0; if (burn ~ /ms$/) s /= 1000; else if (burn ~ /us$|µs$/) s /= 1e6
					ratio = (b > 0) ? sprintf("%.2f", c / b) : "-"
					printf "| %s | %d | %s | 32 | %.0f | %s | %.0f | %.0f | %.0f | %.1f | %.1f | %d | %d |\n", burn, np, ver, c, ratio, np / s, p, q, u, cu, e, x
				}'
			done
		done
	done
	echo
	notes "${keys[@]}"
}

# profiles_section: the profile summaries.
profiles_section() {
	local k
	for k in $versions payload; do
		echo "${prof[$k]:-**$k**: not profiled (BENCH_PROFILE=0, or BENCH_GATEWAY set)}"
		echo
	done
}

# stdio_hop_line: what the stdio hop alone costs on this machine.
stdio_hop_line() {
	if [[ -z ${stdio_hop_us:-} ]]; then
		echo "The stdio hop alone: not measured."
		return
	fi
	echo "The stdio hop alone (\`go test -bench RoundTrip ./internal/upstream/stdio/\`: one line at a time to a child"
	echo "that echoes it and back, no HTTP and no gateway): $stdio_hop_us µs a round trip, $stdio_hop_sleeps thread sleeps of"
	echo "the sending process per round trip. A call through the gateway at one session pays this hop on"
	echo "top of the direct server's path, so the p50 added at 1 session cannot be less."
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

# ratio_target TEXT KEY_A KEY_B FIELD OP LIMIT UNIT: a target on A/B of
# FIELD (OP is ge or le).
ratio_target() {
	local m=() line=""
	if read -r -a m < <(compare "$2" "$3" "$4"); then
		line=$(awk -v a="${m[0]}" -v b="${m[1]}" -v op="$5" -v lim="$6" -v unit="$7" 'BEGIN {
			if (b <= 0) { printf "no call measured on the other side (%.1f vs 0 %s)\t%s", a, unit, (op == "ge" && a > 0 ? "yes" : "no"); exit }
			r = a / b
			ok = (op == "ge") ? r >= lim : r <= lim
			printf "%.2f (%.1f vs %.1f %s)\t%s", r, a, b, unit, (ok ? "yes" : "no") }')
	fi
	target "$1" "${line%$'\t'*}" "${line#*$'\t'}"
}

# alternating_ratios VERSION FIELD: the per-round ratios shared/baseline of
# FIELD in the alternating rounds, one "ratio shared baseline" a line, for
# the rounds that measured both.
alternating_ratios() {
	local r a b
	for ((r = 1; r <= rounds; r++)); do
		a=$(field "$2" "${result[al/shared/$1/$r]:-}") b=$(field "$2" "${result[al/baseline/$1/$r]:-}")
		[[ -n $a && -n $b ]] && awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.4f %s %s\n", a / b, a, b }'
	done
	return 0
}

# alternating_target TEXT VERSION FIELD OP LIMIT UNIT: a target on the
# median of the alternating rounds' ratios of FIELD (shared/baseline); with
# no alternating round measured, the throughput rows' ratio.
alternating_target() {
	local lines line=""
	lines=$(alternating_ratios "$2" "$3")
	if [[ -z $lines ]]; then
		ratio_target "$1" "tp/shared/$2/32" "tp/baseline/$2/32" "$3" "$4" "$5" "$6"
		return
	fi
	line=$(sort -g <<<"$lines" | awk -v op="$4" -v lim="$5" -v unit="$6" '
		{ r[NR] = $1; a[NR] = $2; b[NR] = $3 }
		END {
			m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
			all = ""; for (i = 1; i <= NR; i++) all = all (i > 1 ? ", " : "") sprintf("%.2f", r[i])
			ok = (op == "ge") ? m >= lim : m <= lim
			if (NR == 1) printf "%.2f (%.1f vs %.1f %s, one alternating round)\t%s", m, a[1], b[1], unit, (ok ? "yes" : "no")
			else printf "%.2f (median of %d alternating rounds: %s)\t%s", m, NR, all, (ok ? "yes" : "no") }')
	target "$1" "${line%$'\t'*}" "${line#*$'\t'}"
}

# alternating_table: the alternating rounds, a row each.
alternating_table() {
	echo "| round | version | direct calls/s | gateway calls/s | calls/s ratio | direct CPU µs per call | gateway CPU µs per call | CPU ratio | errors | crossed |"
	echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	local r v b g keys=()
	for ((r = 1; r <= rounds; r++)); do
		for v in $versions; do
			b=${result[al/baseline/$v/$r]:-} g=${result[al/shared/$v/$r]:-}
			keys+=("al/baseline/$v/$r" "al/shared/$v/$r")
			if [[ -z $(field calls_per_sec "$b") || -z $(field calls_per_sec "$g") ]]; then
				echo "| $r | $v | failed | | | | | | | |"
				continue
			fi
			awk -v r="$r" -v ver="$v" -v bc="$(field calls_per_sec "$b")" -v gc="$(field calls_per_sec "$g")" \
				-v bu="$(field proc_cpu_us_per_call "$b")" -v gu="$(field proc_cpu_us_per_call "$g")" \
				-v e="$(field errors "$g")" -v x="$(field crossed "$g")" 'BEGIN {
				printf "| %d | %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.2f | %d | %d |\n", r, ver, bc, gc, gc / bc, bu, gu, (bu > 0 ? gu / bu : 0), e, x }'
		done
	done
	echo
	notes "${keys[@]}"
}

# targets_table: issue 22's targets, judged on this run.
targets_table() {
	local v m=() line n limit
	echo "| target | measured | met |"
	echo "| --- | --- | --- |"
	for v in $versions; do
		limit=1.3
		stateless "$v" && limit=1.5
		alternating_target "gateway CPU per call, shared, 32 sessions, $v: ≤ $limit × the direct server's" \
			"$v" proc_cpu_us_per_call le "$limit" "µs"
	done
	target "gateway CPU per call ≤ 0.5 × TBXark/mcp-proxy's" "$tbxark_why" "not measured"
	for v in $versions; do
		alternating_target "calls/s, shared, 32 sessions, $v: ≥ 0.8 × the direct server's" \
			"$v" calls_per_sec ge 0.8 "calls/s"
		ratio_target "calls/s, shared, 32 sessions, $v: ≥ 1.5 × the best peer's (supergateway; TBXark not run)" \
			"tp/shared/$v/32" "tp/supergateway/$v/32" calls_per_sec ge 1.5 "calls/s"
	done
	for v in $versions; do
		limit=50
		stateless "$v" && limit=80
		if read -r -a m < <(compare "tp/shared/$v/1" "tp/baseline/$v/1" p50_us); then
			line=$(awk -v a="${m[0]}" -v b="${m[1]}" -v l="$limit" -v hop="${stdio_hop_us:-}" 'BEGIN {
				d = a - b
				floor = (hop != "") ? sprintf("; a stdio round trip alone, no gateway: %d µs", hop) : ""
				printf "%+.0f µs (%.0f vs %.0f µs%s)\t%s", d, a, b, floor, (d <= l ? "yes" : "no") }')
		else line=""; fi
		target "p50 added at 1 session, shared, $v: ≤ $limit µs" "${line%$'\t'*}" "${line#*$'\t'}"
	done
	for n in $size_sessions; do
		ratio_target "1 MiB echoes, $n session$([[ $n == 1 ]] || echo s), 2025-11-25 (\`mcpecho --scan\`): MB/s ≥ 0.8 × the direct server's" \
			"pl/shared/1048576/$n" "pl/baseline/1048576/$n" mb_per_sec ge 0.8 "MB/s"
	done
	if [[ $processes_ok == yes ]]; then
		local burn
		for burn in $burns; do
			for v in $processes_versions; do
				ratio_target "\`processes: 2\` vs \`processes: 1\`, CPU-bound child (\`--burn $burn\`), 32 sessions, $v: ≥ 1.7 × calls/s" \
					"pr/$burn/2/$v" "pr/$burn/1/$v" calls_per_sec ge 1.7 "calls/s"
			done
		done
	else
		target "\`processes: 2\` ≥ 1.7 × \`processes: 1\` calls/s, CPU-bound child" "skipped: processes not supported by this build" "not measured"
	fi
	if [[ $mem_ok == 1 ]]; then
		line=$(awk -v n="$idle" -v b="$mem_before" -v h="$mem_held" 'BEGIN { k = (h - b) / n; printf "%.1f KiB\t%s", k, (k <= 8 ? "yes" : "no") }')
	else line=""; fi
	target "idle memory at $idle sessions: ≤ 8 KiB per session (an earlier issue's)" "${line%$'\t'*}" "${line#*$'\t'}"

	# Every run of the gateway: throughput, payload, processes and startup
	# rows, and the idle run's sessions.
	local k runs=0 bad=0 errs=0 crossed=0
	for k in "${!result[@]}"; do
		[[ $k =~ ^((tp|pl|op|al)/(shared|session|session-prewarm)(/|$)|pr/) ]] || continue
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
