package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/loadgen"
)

// The cluster's costs, each against its baseline in the same run
// (scripts/bench-cluster.sh runs them: go test -run '^$' -bench Cluster
// -benchtime 1x ./e2e/):
//
//   - BenchmarkClusterHop: a call of an owner-bound session sent to the
//     owner, and the same call sent to another replica, which forwards it
//     (one hop): the hop's p50 on loopback.
//   - BenchmarkClusterPortableCPU: the gateways' CPU per call of portable
//     sessions (a remote server): sent to one replica directly, to one
//     replica behind the round-robin proxy (the baseline), to one replica
//     that resumed sessions another opened (what serving a session one does
//     not own costs, the load on one replica as in the baseline), and
//     spread over three by that proxy (each replica resuming the sessions),
//     with the same 16 sessions and with 48 (each replica as busy as the
//     one), with the replicas' sleeps per call; raw, and with GOMAXPROCS=1
//     in every replica. With PROFILE, scripts/bench-cluster.sh has each
//     replica profiled in each phase (profileReplicas).

// rawSession is a session driven with plain HTTP requests (keep-alive
// connections, as a load balancer's to the gateway are).
type rawSession struct {
	client *http.Client
	sid    string
}

func rawPost(tb testing.TB, client *http.Client, url, sid, body string) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		tb.Fatal(err)
	}
	return resp, string(b)
}

// openRaw initializes a session at url.
func openRaw(tb testing.TB, url string) *rawSession {
	tb.Helper()
	s := &rawSession{client: &http.Client{Timeout: 30 * time.Second}}
	resp, body := rawPost(tb, s.client, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	if s.sid = resp.Header.Get("Mcp-Session-Id"); resp.StatusCode != http.StatusOK || s.sid == "" {
		tb.Fatalf("initialize at %s: %d %s", url, resp.StatusCode, body)
	}
	rawPost(tb, s.client, url, s.sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// call makes one echo call at url and returns its latency.
func (s *rawSession) call(tb testing.TB, url string) time.Duration {
	tb.Helper()
	start := time.Now()
	resp, body := rawPost(tb, s.client, url, s.sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hop"}}}`)
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"hop"`) {
		tb.Fatalf("call at %s: %d %s", url, resp.StatusCode, body)
	}
	return took
}

func p50(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

func BenchmarkClusterHop(b *testing.B) {
	_, _, replicas, _ := startCluster(b, 2, nil)
	owner := "http://" + replicas[0].addr + "/servers/echo/mcp"
	other := "http://" + replicas[1].addr + "/servers/echo/mcp"
	s := openRaw(b, owner)
	const calls = 2000
	for range 200 { // warm both paths (connections, the hop's pool)
		s.call(b, owner)
		s.call(b, other)
	}
	b.ResetTimer()
	for range b.N {
		direct, hop := make([]time.Duration, 0, calls), make([]time.Duration, 0, calls)
		for range calls { // interleaved, so both see the same machine
			direct = append(direct, s.call(b, owner))
			hop = append(hop, s.call(b, other))
		}
		d, h := p50(direct), p50(hop)
		b.ReportMetric(float64(d.Microseconds()), "direct-p50-µs")
		b.ReportMetric(float64(h.Microseconds()), "hop-p50-µs")
		b.ReportMetric(float64((h - d).Microseconds()), "hop-adds-p50-µs")
	}
}

// cpuTicks returns the CPU time (user + system) of process pid so far.
func cpuTicks(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command (which may hold spaces) start after ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// BenchmarkClusterPortableCPU measures twice: "raw", the replicas as they
// run by default, and "gomaxprocs=1", the same three processes restarted
// with one P each, the baseline's replica included. In a cluster each
// replica has cores of its own (a pod's CPU limit, which Go reads to set
// GOMAXPROCS), and no replica's scheduler competes with another's. Here
// three processes with two Ps each share two cores with the load
// generator: when a goroutine of a replica wakes another, the runtime
// wakes an idle thread to look for work (wakep, findRunnable, futex),
// which in a process a third as busy as the baseline's mostly finds none
// and sleeps again. Profiles of "raw" put most of the difference between
// the cluster and the baseline there and in the sleeping and waking
// itself, and none in the gateway's cluster code (docs/benchmarks.md);
// one P per replica removes the first part (the sleeps per call halve),
// not the second, which no setting of this machine removes: the load
// generator shares its two cores, so three replicas cannot be given three
// times the calls. The gateway's own cost of serving a session it did not
// open is the "resumed" phase, measured at the baseline's load. The two
// idle replicas run, and are counted, in every phase.
func BenchmarkClusterPortableCPU(b *testing.B) {
	_, _, replicas, _ := startCluster(b, 3, nil)
	b.Run("raw", func(b *testing.B) { portableCPU(b, "raw", replicas) })
	for _, r := range replicas {
		r.restart(b, "GOMAXPROCS=1")
	}
	b.Run("gomaxprocs=1", func(b *testing.B) { portableCPU(b, "gomaxprocs1", replicas) })
}

// portableCPU is BenchmarkClusterPortableCPU's measure of replicas;
// variant names its profiles.
func portableCPU(b *testing.B, variant string, replicas []*gatewayReplica) {
	var addrs []string
	for _, r := range replicas {
		addrs = append(addrs, r.addr)
	}
	rr := startRoundRobinWith(b, addrs, true)
	// The baseline: one replica behind the same proxy (its hop costs the
	// gateway nothing, but it slows the closed loop, and a gateway less
	// busy spends more CPU per call).
	one := startRoundRobinWith(b, addrs[:1], true)
	// Sessions opened on one replica and all their calls served by
	// another, which resumes them: one replica as busy as the baseline's,
	// serving sessions it does not own.
	resumed := startRoundRobinSplit(b, addrs[:2], true, []int{0}, []int{1})
	cpu := func() (sum time.Duration, switches int64) {
		for _, r := range replicas {
			sum += cpuTicks(b, r.p.cmd.Process.Pid)
			switches += sleeps(b, r.p.cmd.Process.Pid)
		}
		return sum, switches
	}
	round := 0
	// measure returns the replicas' CPU and voluntary context switches per
	// call of a load at url.
	measure := func(phase, url string, sessions int) (perCall, switchesPerCall float64) {
		profiled := profileReplicas(b, replicas, fmt.Sprintf("%s-%s-%d", variant, phase, round), 3*time.Second)
		cpu0, sw0 := cpu()
		res, err := loadgen.Run(context.Background(), loadgen.Options{URL: url, Sessions: sessions, Duration: 2 * time.Second, Warmup: time.Second})
		if err != nil || res.Errors > 0 || res.Crossed > 0 || res.Calls == 0 {
			b.Fatalf("load at %s: %v, %d errors (%s), %d crossed", url, err, res.Errors, res.FirstError, res.Crossed)
		}
		// The warmup's calls cost CPU too: count them by the rate.
		calls := res.CallsPerSec * (res.Elapsed + time.Second).Seconds()
		cpu1, sw1 := cpu()
		profiled(calls)
		return float64((cpu1 - cpu0).Microseconds()) / calls, float64(sw1-sw0) / calls
	}
	// Alternating rounds, so that whatever else the machine does weighs on
	// every phase; the medians are reported.
	const rounds = 3
	for range b.N {
		var direct, single, away, cluster, cluster3, singleSw, clusterSw []float64
		add := func(to, sw *[]float64, phase, url string, sessions int) {
			c, s := measure(phase, url, sessions)
			*to = append(*to, c)
			if sw != nil {
				*sw = append(*sw, s)
			}
		}
		for range rounds {
			round++
			add(&direct, nil, "direct", "http://"+replicas[0].addr+"/servers/remote/mcp", 16)
			add(&single, &singleSw, "single", one.srv.URL+"/servers/remote/mcp", 16)
			add(&away, nil, "resumed", resumed.srv.URL+"/servers/remote/mcp", 16)
			add(&cluster, &clusterSw, "cluster", rr.srv.URL+"/servers/remote/mcp", 16)
			// Three times the sessions: each replica as busy as the one
			// (as far as the load generator, on the same two cores, can).
			add(&cluster3, nil, "cluster-x3", rr.srv.URL+"/servers/remote/mcp", 48)
		}
		d, s, a, c, c3 := median(direct), median(single), median(away), median(cluster), median(cluster3)
		b.ReportMetric(d, "direct-µs/call")
		b.ReportMetric(s, "single-µs/call")
		b.ReportMetric(a, "resumed-µs/call")
		b.ReportMetric(a/s, "resumed/single")
		b.ReportMetric(c, "cluster-µs/call")
		b.ReportMetric(c/s, "cluster/single")
		b.ReportMetric(c3, "cluster-x3-µs/call")
		b.ReportMetric(c3/s, "cluster-x3/single")
		// Where the difference goes: a replica's thread that finds no
		// work sleeps (a voluntary context switch) and is woken for the
		// next call; replicas a third as busy do that more per call.
		b.ReportMetric(median(singleSw), "single-sleeps/call")
		b.ReportMetric(median(clusterSw), "cluster-sleeps/call")
	}
}

// sleeps returns how often the threads of process pid have given up
// their CPU of their own accord so far (blocked: waiting for work, the
// network, a lock), summed over its threads that live.
func sleeps(tb testing.TB, pid int) int64 {
	tb.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		tb.Fatalf("threads of process %d: %v", pid, err)
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		_, rest, _ := strings.Cut(string(b), "\nvoluntary_ctxt_switches:")
		field, _, _ := strings.Cut(rest, "\n")
		v, err := strconv.ParseInt(strings.TrimSpace(field), 10, 64)
		if err != nil {
			tb.Fatalf("%s: no voluntary_ctxt_switches", t)
		}
		n += v
	}
	return n
}

// profileReplicas takes a CPU profile of each replica for the next d,
// when the gateway was built with -tags pprof and MCPGATE_PPROF_DIR names
// a directory (scripts/bench-cluster.sh with PROFILE): <phase>-r<i>.pprof
// there, with the allocations meanwhile in <phase>-r<i>.allocs, and the
// returned function, given the calls made meanwhile, waits for the
// profiles and appends "<phase> <calls>" to calls.txt, so that each
// profile can be read per call. Without the directory it does nothing.
func profileReplicas(tb testing.TB, replicas []*gatewayReplica, phase string, d time.Duration) func(calls float64) {
	tb.Helper()
	dir := os.Getenv("MCPGATE_PPROF_DIR")
	if dir == "" {
		return func(float64) {}
	}
	var wg sync.WaitGroup
	for i, r := range replicas {
		addr, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(r.p.cmd.Process.Pid)))
		if err != nil {
			tb.Fatalf("replica %s serves no profiles (built without -tags pprof?): %v", r.name, err)
		}
		// The CPU, and the allocations made meanwhile (a delta).
		for kind, file := range map[string]string{"profile": "pprof", "allocs": "allocs"} {
			wg.Go(func() {
				url := fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, kind, int(d.Seconds()))
				resp, err := http.Get(url)
				if err != nil {
					tb.Errorf("profiling %s: %v", r.name, err)
					return
				}
				defer resp.Body.Close()
				prof, err := io.ReadAll(resp.Body)
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-r%d.%s", phase, i, file)), prof, 0o644)
				}
				if err != nil {
					tb.Errorf("profiling %s: %v", r.name, err)
				}
			})
		}
	}
	return func(calls float64) {
		wg.Wait()
		f, err := os.OpenFile(filepath.Join(dir, "calls.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = fmt.Fprintf(f, "%s %.0f\n", phase, calls)
			f.Close()
		}
		if err != nil {
			tb.Errorf("profiling: %v", err)
		}
	}
}

func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}
