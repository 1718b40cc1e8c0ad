package memlimit

import (
	"os"
	"testing"
	"testing/fstest"
)

// The mountinfo lines of a hybrid host (v1 controllers, v2 unified beside
// them), as this repository's build machine has them.
const hybridMounts = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

func TestFind(t *testing.T) {
	cases := []struct {
		name  string
		files fstest.MapFS
		want  Limit
		ok    bool
	}{{
		name: "v2 in a container (cgroup namespace: the group is /)",
		files: fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"proc/self/mountinfo":      file("25 20 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"),
			"sys/fs/cgroup/memory.max": file("536870912\n"),
		},
		want: Limit{Bytes: 512 << 20, File: "sys/fs/cgroup/memory.max"}, ok: true,
	}, {
		name: "v2, a parent's limit is smaller than the group's own",
		files: fstest.MapFS{
			"proc/self/cgroup":                          file("0::/kubepods/pod1/c1\n"),
			"proc/self/mountinfo":                       file("25 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": file("max\n"),
			"sys/fs/cgroup/kubepods/pod1/memory.max":    file("268435456\n"),
			"sys/fs/cgroup/kubepods/memory.max":         file("1073741824\n"),
		},
		want: Limit{Bytes: 256 << 20, File: "sys/fs/cgroup/kubepods/pod1/memory.max"}, ok: true,
	}, {
		name: "v2 unlimited everywhere",
		files: fstest.MapFS{
			"proc/self/cgroup":                    file("0::/user.slice\n"),
			"proc/self/mountinfo":                 file("25 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
			"sys/fs/cgroup/user.slice/memory.max": file("max\n"),
		},
	}, {
		name: "v1 memory controller, limited",
		files: fstest.MapFS{
			"proc/self/cgroup":    file("4:memory:/docker/abc\n0::/\n"),
			"proc/self/mountinfo": file(hybridMounts),
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": file("2147483648\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            file("9223372036854771712\n"),
		},
		want: Limit{Bytes: 2 << 30, File: "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes"}, ok: true,
	}, {
		name: "v1 unlimited (the largest page-aligned value), as on the build machine",
		files: fstest.MapFS{
			"proc/self/cgroup":    file("4:memory:/process_api/f79a\n0::/\n"),
			"proc/self/mountinfo": file(hybridMounts),
			"sys/fs/cgroup/memory/process_api/f79a/memory.limit_in_bytes": file("9223372036854771712\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                  file("9223372036854771712\n"),
		},
	}, {
		name: "v1 mount of a subtree: the mount's root is stripped from the group's path",
		files: fstest.MapFS{
			"proc/self/cgroup":                              file("7:cpu,memory:/kubepods/pod2/c2\n"),
			"proc/self/mountinfo":                           file("34 30 0:31 /kubepods/pod2 /sys/fs/cgroup/memory ro - cgroup cgroup rw,cpu,memory\n"),
			"sys/fs/cgroup/memory/c2/memory.limit_in_bytes": file("104857600"),
		},
		want: Limit{Bytes: 100 << 20, File: "sys/fs/cgroup/memory/c2/memory.limit_in_bytes"}, ok: true,
	}, {
		name: "a group outside the mounted subtree is not read",
		files: fstest.MapFS{
			"proc/self/cgroup":                           file("7:memory:/other\n"),
			"proc/self/mountinfo":                        file("34 30 0:31 /kubepods /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("104857600"),
		},
	}, {
		name: "a mount point with a space (escaped as \\040)",
		files: fstest.MapFS{
			"proc/self/cgroup":    file("0::/\n"),
			"proc/self/mountinfo": file("25 20 0:26 / /cg\\040root rw - cgroup2 cgroup2 rw\n"),
			"cg root/memory.max":  file("1048576\n"),
		},
		want: Limit{Bytes: 1 << 20, File: "cg root/memory.max"}, ok: true,
	}, {
		name:  "no cgroup files (not Linux)",
		files: fstest.MapFS{},
	}, {
		name: "garbage in the limit file is no limit",
		files: fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"proc/self/mountinfo":      file("25 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
			"sys/fs/cgroup/memory.max": file("lots\n"),
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Find(c.files)
			if got != c.want || ok != c.ok {
				t.Fatalf("Find = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// TestFindHere reads the machine's own cgroups: whatever it finds must be
// one of the files it names, holding that number.
func TestFindHere(t *testing.T) {
	lim, ok := Find(os.DirFS("/"))
	if !ok {
		t.Skip("no memory limit on this machine's cgroups")
	}
	b, err := os.ReadFile("/" + lim.File)
	if err != nil {
		t.Fatalf("Find named %s: %v", lim.File, err)
	}
	if lim.Bytes <= 0 || len(b) == 0 {
		t.Fatalf("Find = %+v from %q", lim, b)
	}
}

func TestParseCgroup(t *testing.T) {
	v1, v2 := ParseCgroup([]byte("12:pids:/a\n4:cpu,memory:/docker/x\nbroken\n1:name=systemd:/\n0::/init.scope\n"))
	if v1 != (Group{Path: "/docker/x", Found: true}) || v2 != (Group{Path: "/init.scope", Found: true}) {
		t.Fatalf("ParseCgroup = %+v, %+v", v1, v2)
	}
	if v1, v2 := ParseCgroup([]byte("4:memorysomething:/x\n")); v1.Found || v2.Found {
		t.Fatalf("a controller that only starts with memory was taken: %+v %+v", v1, v2)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:  "/a b",
		`/tab\011`: "/tab\t",
		`/x\134y`:  `/x\y`,
		`/bad\9`:   `/bad\9`,
		`/end\04`:  `/end\04`,
		`/big\777`: `/big\777`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseCgroup(f *testing.F) {
	f.Add([]byte("4:memory:/docker/abc\n0::/\n"))
	f.Add([]byte("0::/kubepods/pod1\n"))
	f.Add([]byte(":::\n::\n0::\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v1, v2 := ParseCgroup(b)
		for _, g := range []Group{v1, v2} {
			if g.Found && (len(g.Path) == 0 || g.Path[0] != '/') {
				t.Fatalf("group path %q does not start with /", g.Path)
			}
		}
	})
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add([]byte(hybridMounts))
	f.Add([]byte("25 20 0:26 / /cg\\040root rw - cgroup2 cgroup2 rw\n"))
	f.Add([]byte("1 2 3 4 5 6 -\n1 2 3 / / o - cgroup\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range ParseMountinfo(b) {
			if m.V2 == m.V1Memory {
				t.Fatalf("mount %+v is neither or both kinds", m)
			}
			if m.Point == "" || m.Point[0] == '/' || len(m.Root) == 0 || m.Root[0] != '/' {
				t.Fatalf("mount %+v: point must be relative and root absolute", m)
			}
		}
	})
}

// FuzzFind checks that whatever the files say, Find names a file it read
// and a positive limit below the unlimited mark.
func FuzzFind(f *testing.F) {
	f.Add([]byte("0::/a\n"), []byte("25 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"), []byte("1000\n"))
	f.Add([]byte("4:memory:/a\n"), []byte(hybridMounts), []byte("9223372036854771712"))
	f.Fuzz(func(t *testing.T, groups, mounts, limit []byte) {
		fsys := fstest.MapFS{
			"proc/self/cgroup":                             &fstest.MapFile{Data: groups},
			"proc/self/mountinfo":                          &fstest.MapFile{Data: mounts},
			"sys/fs/cgroup/a/memory.max":                   &fstest.MapFile{Data: limit},
			"sys/fs/cgroup/memory/a/memory.limit_in_bytes": &fstest.MapFile{Data: limit},
		}
		lim, ok := Find(fsys)
		if !ok {
			return
		}
		if lim.Bytes <= 0 || lim.Bytes >= unlimited {
			t.Fatalf("limit %d out of range", lim.Bytes)
		}
		if _, err := fsys.Open(lim.File); err != nil {
			t.Fatalf("Find named %q, which is not there", lim.File)
		}
	})
}
