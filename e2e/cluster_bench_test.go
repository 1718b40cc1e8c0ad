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
//     one). With PROFILE, scripts/bench-cluster.sh has each replica
//     profiled in each phase (profileReplicas).

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

func BenchmarkClusterPortableCPU(b *testing.B) {
	_, _, replicas, _ := startCluster(b, 3, nil)
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
	resumed := startRoundRobinWith(b, addrs[:2], true)
	resumed.openOn, resumed.callOn = []int{0}, []int{1}
	cpu := func() (sum time.Duration) {
		for _, r := range replicas {
			sum += cpuTicks(b, r.p.cmd.Process.Pid)
		}
		return sum
	}
	round := 0
	measure := func(phase, url string, sessions int) float64 {
		profiled := profileReplicas(b, replicas, fmt.Sprintf("%s-%d", phase, round), 3*time.Second)
		before := cpu()
		res, err := loadgen.Run(context.Background(), loadgen.Options{URL: url, Sessions: sessions, Duration: 2 * time.Second, Warmup: time.Second})
		if err != nil || res.Errors > 0 || res.Crossed > 0 || res.Calls == 0 {
			b.Fatalf("load at %s: %v, %d errors (%s), %d crossed", url, err, res.Errors, res.FirstError, res.Crossed)
		}
		// The warmup's calls cost CPU too: count them by the rate.
		calls := res.CallsPerSec * (res.Elapsed + time.Second).Seconds()
		perCall := float64((cpu() - before).Microseconds()) / calls
		profiled(calls)
		return perCall
	}
	// Alternating rounds, so that whatever else the machine does weighs on
	// all three; the medians are reported.
	const rounds = 3
	for range b.N {
		var direct, single, away, cluster, cluster3 []float64
		for range rounds {
			round++
			direct = append(direct, measure("direct", "http://"+replicas[0].addr+"/servers/remote/mcp", 16))
			single = append(single, measure("single", one.srv.URL+"/servers/remote/mcp", 16))
			away = append(away, measure("resumed", resumed.srv.URL+"/servers/remote/mcp", 16))
			cluster = append(cluster, measure("cluster", rr.srv.URL+"/servers/remote/mcp", 16))
			// Three times the sessions: each replica as busy as the one.
			cluster3 = append(cluster3, measure("cluster-x3", rr.srv.URL+"/servers/remote/mcp", 48))
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
	}
}

// profileReplicas takes a CPU profile of each replica for the next d,
// when the gateway was built with -tags pprof and MCPGATE_PPROF_DIR names
// a directory (scripts/bench-cluster.sh with PROFILE): <phase>-r<i>.pprof
// there, with the allocations meanwhile in <phase>-r<i>.allocs, and the returned function, given the calls made meanwhile,
// waits for the profiles and appends "phase calls" to calls.txt, so that
// each profile can be read per call. Without the directory it does
// nothing.
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
