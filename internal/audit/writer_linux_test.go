//go:build linux

package audit

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// mountSmallFS mounts a 64 KiB tmpfs for the test, or skips: mounting
// needs root (or CAP_SYS_ADMIN) and a kernel that lets this process.
func mountSmallFS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root and a kernel that permits it): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the test tmpfs: %v", err)
		}
	})
	return dir
}

// fill writes a file in dir until the filesystem is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return path
		}
	}
}

// A real full filesystem: the audit log's writes fail while it is full
// (the lines are counted as lost), and once space is freed the next line
// is written, after a "dropped" line telling how many are missing.
func TestAuditFullFilesystemRecovers(t *testing.T) {
	dir := mountSmallFS(t)
	path := filepath.Join(dir, "audit.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	filler := fill(t, dir)
	au := NewWith(f, Options{Logger: testAuditLogger(&testkit.SyncBuffer{}), Name: path})
	au.log(auditTestLine(0))
	testkit.WaitFor(t, "the write to the full filesystem to fail", func() bool { return au.WriteStats().Errors > 0 })
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	au.log(auditTestLine(1))
	au.Close()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := parseAudit(t, string(data))
	if len(lines) != 2 || lines[0].Dropped != 1 || lines[1].Method != "m1" {
		t.Errorf("the log holds %q; want a dropped line of 1, then m1", data)
	}
	if s := au.WriteStats(); s != (WriteStats{Errors: 1, Lost: 1}) {
		t.Errorf("WriteStats %+v, want 1 error, 1 lost", s)
	}
}
