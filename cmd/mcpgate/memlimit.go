package main

import (
	"io/fs"
	"log/slog"
	"runtime/debug"

	"github.com/mcpgate/mcpgate/internal/memlimit"
)

// memoryShare is the part of a cgroup's memory limit that the gateway
// gives Go's garbage collector as its soft limit when GOMEMLIMIT is not
// set: the rest is headroom for what the collector does not count (thread
// stacks outside the heap, the binary, kernel buffers charged to the group).
const memoryShare = 0.9

// defaultMemoryLimit returns the soft memory limit the gateway sets when
// the environment's GOMEMLIMIT (given as gomemlimit) is empty: memoryShare
// of the smallest memory limit of the process's cgroups, read through
// fsys. ok is false when GOMEMLIMIT is set (the operator's value, "off"
// included, stands) or no cgroup limits the process.
func defaultMemoryLimit(gomemlimit string, fsys fs.FS) (soft int64, lim memlimit.Limit, ok bool) {
	if gomemlimit != "" {
		return 0, memlimit.Limit{}, false
	}
	lim, ok = memlimit.Find(fsys)
	if !ok {
		return 0, lim, false
	}
	return int64(float64(lim.Bytes) * memoryShare), lim, true
}

// setMemoryLimit applies defaultMemoryLimit and logs what it set.
func setMemoryLimit(log *slog.Logger, gomemlimit string, fsys fs.FS) {
	soft, lim, ok := defaultMemoryLimit(gomemlimit, fsys)
	if !ok {
		return
	}
	debug.SetMemoryLimit(soft)
	log.Info("memory limit from the cgroup: GOMEMLIMIT set to 90% of it (set GOMEMLIMIT to choose another, or off for none)",
		"cgroup_limit_bytes", lim.Bytes, "gomemlimit_bytes", soft, "from", "/"+lim.File)
}
