package procstat

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	const tail = " S 1 1 1 0 -1 4194560 100 0 0 0 1234 56 7 8 20 0 1 0 100 1000 10 18446744073709551615"
	for _, tt := range []struct {
		name, stat string
		want       Times
		err        bool
	}{
		{"plain", "42 (mcpgate)" + tail, Times{12340 * time.Millisecond, 560 * time.Millisecond, 70 * time.Millisecond, 80 * time.Millisecond}, false},
		{"name with spaces and parentheses", "42 (a) b (c))" + tail, Times{12340 * time.Millisecond, 560 * time.Millisecond, 70 * time.Millisecond, 80 * time.Millisecond}, false},
		{"no name", "42 mcpgate S 1", Times{}, true},
		{"too few fields", "42 (x) S 1 1 1 0 -1 4194560 100 0 0 0 1234 56", Times{}, true},
		{"not a number", "42 (x) S 1 1 1 0 -1 4194560 100 0 0 0 12a4 56 7 8", Times{}, true},
		{"negative", "42 (x) S 1 1 1 0 -1 4194560 100 0 0 0 -1 56 7 8", Times{}, true},
		{"overflow", "42 (x) S 1 1 1 0 -1 4194560 100 0 0 0 99999999999999999999 56 7 8", Times{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.stat))
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("ParseStat = %+v, %v; want %+v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestParseSwitches(t *testing.T) {
	for _, tt := range []struct {
		name, status string
		want         uint64
		err          bool
	}{
		{"both", "Name:\tx\nvoluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t3\n", 13, false},
		{"no final newline", "voluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t3", 13, false},
		{"one missing", "voluntary_ctxt_switches:\t10\n", 0, true},
		{"not a number", "voluntary_ctxt_switches:\tx\nnonvoluntary_ctxt_switches:\t3\n", 0, true},
		{"overflow", "voluntary_ctxt_switches:\t18446744073709551615\nnonvoluntary_ctxt_switches:\t3\n", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSwitches([]byte(tt.status))
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("ParseSwitches = %d, %v; want %d, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestParseChildren(t *testing.T) {
	got, err := ParseChildren([]byte("12 345 \n"))
	if err != nil || !slices.Equal(got, []int{12, 345}) {
		t.Fatalf("ParseChildren = %v, %v", got, err)
	}
	if got, err := ParseChildren(nil); err != nil || len(got) != 0 {
		t.Fatalf("ParseChildren(empty) = %v, %v", got, err)
	}
	if _, err := ParseChildren([]byte("12 x")); err == nil {
		t.Fatal("ParseChildren accepted a non-pid")
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (mcpgate) S 1 1 1 0 -1 4194560 100 0 0 0 1234 56 7 8 20 0 1 0 100"))
	f.Add([]byte("1 ((x)) R 0 0 0 0 0 0 0 0 0 0 0 0 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseStat(b)
		if err == nil && (v.User < 0 || v.System < 0 || v.ChildUser < 0 || v.ChildSystem < 0) {
			t.Fatalf("ParseStat(%q) = %+v: a negative time", b, v)
		}
	})
}

func FuzzParseSwitches(f *testing.F) {
	f.Add([]byte("voluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseSwitches(b)
		if err != nil && n != 0 {
			t.Fatalf("ParseSwitches(%q) = %d with error %v", b, n, err)
		}
	})
}

func FuzzParseChildren(f *testing.F) {
	f.Add([]byte("12 345 "))
	f.Fuzz(func(t *testing.T, b []byte) {
		pids, err := ParseChildren(b)
		for _, p := range pids {
			if p <= 0 || err != nil {
				t.Fatalf("ParseChildren(%q) = %v, %v", b, pids, err)
			}
		}
	})
}

// TestReadTreeRealChildren reads this test process and real children: a
// live child is listed with its CPU time, and a child that ended and was
// waited for is counted once in the children's CPU, through cutime.
func TestReadTreeRealChildren(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	self := os.Getpid()
	before, err := ReadTree(self)
	if err != nil {
		t.Fatal(err)
	}
	// A child that works (a shell loop: well over one 10 ms tick) and ends.
	busy := exec.Command("sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`)
	if err := busy.Run(); err != nil {
		t.Fatal(err)
	}
	// A child that stays until its stdin closes.
	live := exec.Command("cat")
	stdin, err := live.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); live.Wait() }()
	kids, err := Children(self)
	if err != nil || !slices.Contains(kids, live.Process.Pid) {
		t.Fatalf("Children(self) = %v, %v; want it to hold %d", kids, err, live.Process.Pid)
	}
	after, err := ReadTree(self)
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	if d.ChildrenCPU <= 0 || d.Process.ReapedCPU != d.ChildrenCPU-childCPU(t, live.Process.Pid) {
		t.Fatalf("children's CPU %s, reaped %s: want the ended child's time, counted once", d.ChildrenCPU, d.Process.ReapedCPU)
	}
	if after.Children < 1 || after.Process.Switches == 0 {
		t.Fatalf("ReadTree = %+v: want the live child and this process's switches", after)
	}
	if _, err := ReadTree(1 << 30); err == nil {
		t.Fatal("ReadTree of no process succeeded")
	}
}

func childCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	p, err := Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return p.CPU
}
