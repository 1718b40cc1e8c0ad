package main

import (
	"testing"
	"testing/fstest"
)

func TestDefaultMemoryLimit(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"proc/self/mountinfo":      {Data: []byte("25 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")},
		"sys/fs/cgroup/memory.max": {Data: []byte("1000000000\n")},
	}
	soft, lim, ok := defaultMemoryLimit("", fsys)
	if !ok || soft != 900000000 || lim.Bytes != 1000000000 || lim.File != "sys/fs/cgroup/memory.max" {
		t.Fatalf("defaultMemoryLimit = %d, %+v, %v; want 90%% of 1000000000 from memory.max", soft, lim, ok)
	}
	for _, env := range []string{"off", "460MiB"} {
		if _, _, ok := defaultMemoryLimit(env, fsys); ok {
			t.Errorf("GOMEMLIMIT=%s was overridden", env)
		}
	}
	if _, _, ok := defaultMemoryLimit("", fstest.MapFS{}); ok {
		t.Error("a limit was set without any cgroup")
	}
}
