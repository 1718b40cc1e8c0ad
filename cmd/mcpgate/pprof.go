//go:build pprof

package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
)

// A gateway built with -tags pprof serves Go's profiles on a loopback port
// of its own when MCPGATE_PPROF_DIR is set, and writes that port's address
// to the file named by its pid in that directory, so that a benchmark
// running several replicas can profile each one (scripts/bench-cluster.sh
// with PROFILE). Release builds have no such code: the profiles show
// memory and the endpoints cost CPU, neither of which a gateway should
// offer on its own.
func init() {
	dir := os.Getenv("MCPGATE_PPROF_DIR")
	if dir == "" {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), []byte(ln.Addr().String()), 0o600); err != nil {
		ln.Close()
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	go http.Serve(ln, mux) //nolint:errcheck // lives as long as the process
}
