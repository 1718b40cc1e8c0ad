// Package memlimit finds the memory limit that the control groups of the
// running process put on it (cgroup v1 and v2), so that a gateway in a
// container can give Go's garbage collector a soft limit below the hard
// one when the operator set none (GOMEMLIMIT): without it the collector
// paces itself by GOGC alone and a burst of garbage can take the heap past
// the cgroup's limit, where the kernel kills the process instead of the
// collector working harder.
package memlimit

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Limit is a memory limit found, and the file that set it.
type Limit struct {
	Bytes int64
	File  string // a path in the file system searched, e.g. sys/fs/cgroup/memory.max
}

// unlimited is where cgroup v1 values stop meaning a limit: an unlimited
// v1 group reports the largest page-aligned int64 (9223372036854771712).
const unlimited = 1 << 62

// Find returns the smallest memory limit among the process's memory
// cgroups and their ancestors up to each hierarchy's mount, read through
// fsys, a file system rooted at "/" (os.DirFS("/")): it reads
// proc/self/cgroup and proc/self/mountinfo to place the process's groups,
// then memory.max (v2) or memory.limit_in_bytes (v1) of each group. ok is
// false when no group sets a limit, or nothing could be read (not Linux,
// no cgroup file system mounted).
func Find(fsys fs.FS) (lim Limit, ok bool) {
	groups, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return Limit{}, false
	}
	mounts, err := fs.ReadFile(fsys, "proc/self/mountinfo")
	if err != nil {
		return Limit{}, false
	}
	v1, v2 := ParseCgroup(groups)
	for _, m := range ParseMountinfo(mounts) {
		var group, file string
		switch {
		case m.V2 && v2.Found:
			group, file = v2.Path, "memory.max"
		case m.V1Memory && v1.Found:
			group, file = v1.Path, "memory.limit_in_bytes"
		default:
			continue
		}
		dir, inside := within(m, group)
		if !inside {
			continue
		}
		for {
			if b, ok := readLimit(fsys, path.Join(dir, file)); ok && (lim.File == "" || b < lim.Bytes) {
				lim = Limit{Bytes: b, File: path.Join(dir, file)}
			}
			if dir == m.Point {
				break
			}
			dir = path.Dir(dir)
		}
	}
	return lim, lim.File != ""
}

// within returns the directory, relative to fsys's root, of the group at
// path group (as /proc/self/cgroup names it) in the hierarchy mounted at m,
// and whether the mount shows that group at all (a mount of a subtree
// shows only the groups under its root).
func within(m Mount, group string) (string, bool) {
	if strings.Contains(group, "/..") { // a group outside the process's cgroup namespace
		return "", false
	}
	group, root := path.Clean("/"+group), path.Clean("/"+m.Root)
	rel, ok := strings.CutPrefix(group, root)
	if !ok || (rel != "" && root != "/" && rel[0] != '/') {
		return "", false
	}
	return path.Join(m.Point, rel), true
}

// readLimit reads one limit file: a number of bytes, or "max" (v2) or a
// value of 2^62 or more (v1) for none.
func readLimit(fsys fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || n <= 0 || n >= unlimited {
		return 0, false
	}
	return n, true
}

// Group is the process's group in one hierarchy, from /proc/self/cgroup.
type Group struct {
	Path  string // e.g. /kubepods/pod1/abc
	Found bool
}

// ParseCgroup reads /proc/self/cgroup ("ID:CONTROLLERS:PATH" a line) and
// returns the process's group in the v1 hierarchy that has the memory
// controller and in the v2 hierarchy (ID 0, no controllers). Lines it
// cannot read are skipped.
func ParseCgroup(b []byte) (v1Memory, v2 Group) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			v2 = Group{Path: p, Found: true}
		case hasWord(controllers, "memory"):
			v1Memory = Group{Path: p, Found: true}
		}
	}
	return v1Memory, v2
}

// Mount is a cgroup file system's mount, from /proc/self/mountinfo.
type Mount struct {
	Root     string // the group shown at Point, e.g. / or /kubepods/pod1
	Point    string // where, relative to the file system's root: sys/fs/cgroup
	V2       bool   // a cgroup2 mount
	V1Memory bool   // a cgroup (v1) mount with the memory controller
}

// ParseMountinfo returns the cgroup mounts listed in /proc/self/mountinfo
// (see proc(5): "ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] -
// FSTYPE SOURCE SUPEROPTIONS"), their paths unescaped. Lines it cannot
// read are skipped.
func ParseMountinfo(b []byte) []Mount {
	var out []Mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) {
			continue
		}
		fstype, super := f[sep+1], ""
		if sep+3 < len(f) {
			super = f[sep+3]
		}
		m := Mount{Root: unescape(f[3]), V2: fstype == "cgroup2", V1Memory: fstype == "cgroup" && hasWord(super, "memory")}
		point := unescape(f[4])
		if !(m.V2 || m.V1Memory) || !strings.HasPrefix(point, "/") || !strings.HasPrefix(m.Root, "/") {
			continue
		}
		m.Point = strings.TrimPrefix(path.Clean(point), "/")
		if m.Point == "" {
			m.Point = "."
		}
		out = append(out, m)
	}
	return out
}

// hasWord reports whether the comma-separated list has w.
func hasWord(list, w string) bool {
	for list != "" {
		var item string
		item, list, _ = strings.Cut(list, ",")
		if item == w {
			return true
		}
	}
	return false
}

// unescape undoes mountinfo's octal escapes (\040 for a space, \011,
// \012, \134); anything else stays as it is.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] >= '0' && s[i+1] <= '3' && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
