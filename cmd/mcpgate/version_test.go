package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
)

// TestServeHandsVersionToGateway: the version and commit set with -X
// main.version and -X main.commit are the ones the gateway sends to
// servers as clientInfo.version and exports in mcpgate_build_info.
func TestServeHandsVersionToGateway(t *testing.T) {
	oldVersion, oldGateway := version, gateway.Version
	oldCommit, oldGatewayCommit := commit, gateway.Commit
	t.Cleanup(func() {
		version, gateway.Version = oldVersion, oldGateway
		commit, gateway.Commit = oldCommit, oldGatewayCommit
	})
	version, commit = "9.8.7-test", "feedc0de"
	var seen, seenCommit string
	old := runGateway
	t.Cleanup(func() { runGateway = old })
	runGateway = func(context.Context, *config.Config, *slog.Logger) error {
		seen, seenCommit = gateway.Version, gateway.Commit
		return nil
	}
	if r := runCLI("serve", "--", "cat"); r.code != 0 {
		t.Fatalf("serve: %+v", r)
	}
	if seen != "9.8.7-test" {
		t.Errorf("gateway.Version during serve = %q, want the -X main.version value", seen)
	}
	if seenCommit != "feedc0de" {
		t.Errorf("gateway.Commit during serve = %q, want the -X main.commit value", seenCommit)
	}
}

// buildBinary builds mcpgate into a temporary directory with the given
// extra go build flags. GOFLAGS may say -buildvcs=false (it does on some
// machines), so each caller says what it wants.
func buildBinary(t *testing.T, flags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcpgate")
	args := append([]string{"build", "-o", bin}, flags...)
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %q: %v\n%s", args, err, out)
	}
	return bin
}

// gitHead returns the commit checked out here, or "" if this is not a git
// checkout (or git is missing): a source tarball builds without one.
func gitHead(t *testing.T) string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Logf("not a git checkout (%v): the commit is not checked", err)
		return ""
	}
	return strings.TrimSpace(string(out))
}

func runBinary(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("%s %q: %v", bin, args, err)
	}
	return string(out)
}

// TestVersionFromBuild builds the binary the way a release does (version
// and build time given at link time) in this checkout, and checks that
// `mcpgate version` prints them and the commit the go command stamped:
// the one `git rev-parse HEAD` names.
func TestVersionFromBuild(t *testing.T) {
	head := gitHead(t)
	vcs := "-buildvcs=auto"
	if head != "" {
		vcs = "-buildvcs=true" // fail, not skip, if it cannot be stamped
	}
	bin := buildBinary(t, vcs, "-ldflags", "-X main.version=1.2.3-ldflags -X main.buildTime=2026-01-02T03:04:05Z")

	text := runBinary(t, bin, "version")
	want := "mcpgate 1.2.3-ldflags\n" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if !strings.HasPrefix(text, want) {
		t.Errorf("mcpgate version = %q, want it to start with %q", text, want)
	}
	if !strings.Contains(text, "\nbuilt 2026-01-02T03:04:05Z\n") {
		t.Errorf("mcpgate version = %q, want the build time", text)
	}
	if head != "" {
		// Whether the tree is modified changes under a test run by
		// others editing it, so only the revision is compared.
		if !strings.Contains(text, "\ncommit "+head+"\n") && !strings.Contains(text, "\ncommit "+head+" (modified)\n") {
			t.Errorf("mcpgate version = %q, want commit %s", text, head)
		}
		if !strings.Contains(text, "\ncommitted ") {
			t.Errorf("mcpgate version = %q, want the commit time", text)
		}
	}

	var got build
	if err := json.Unmarshal([]byte(runBinary(t, bin, "version", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != "1.2.3-ldflags" || got.BuildTime != "2026-01-02T03:04:05Z" ||
		got.Go != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("mcpgate version --json = %+v", got)
	}
	if head != "" && (got.Commit != head || got.CommitTime == "") {
		t.Errorf("mcpgate version --json = %+v, want commit %s and its time", got, head)
	}
}

// TestVersionLinkTimeCommit: a build without VCS stamping (a container
// build whose context has no .git) reports the commit given at link time,
// and nothing it does not know.
func TestVersionLinkTimeCommit(t *testing.T) {
	bin := buildBinary(t, "-buildvcs=false", "-ldflags", "-X main.commit=0123abc")
	text := runBinary(t, bin, "version")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 3 || lines[2] != "commit 0123abc" {
		t.Errorf("mcpgate version = %q, want 3 lines ending with commit 0123abc", text)
	}
	var got build
	if err := json.Unmarshal([]byte(runBinary(t, bin, "version", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Commit != "0123abc" || got.Modified || got.CommitTime != "" || got.BuildTime != "" || got.Version != "dev" {
		t.Errorf("mcpgate version --json = %+v", got)
	}
}

func TestBuildText(t *testing.T) {
	tests := []struct {
		b    build
		want string
	}{
		{build{Version: "dev", Go: "go1.26", Platform: "linux/amd64"}, "mcpgate dev\ngo1.26 linux/amd64\n"},
		{
			build{Version: "v1", Commit: "abc", Modified: true, CommitTime: "T1", BuildTime: "T2", Go: "go1.26", Platform: "linux/arm64"},
			"mcpgate v1\ngo1.26 linux/arm64\ncommit abc (modified)\ncommitted T1\nbuilt T2\n",
		},
		{build{Version: "v1", Commit: "abc", Go: "go1.26", Platform: "darwin/arm64"}, "mcpgate v1\ngo1.26 darwin/arm64\ncommit abc\n"},
	}
	for _, tt := range tests {
		var sb strings.Builder
		tt.b.writeText(&sb)
		if sb.String() != tt.want {
			t.Errorf("writeText(%+v) = %q, want %q", tt.b, sb.String(), tt.want)
		}
	}
}

// TestVersionJSONFlag: --json prints the same facts as one object.
func TestVersionJSONFlag(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v9.9.9"
	r := runCLI("version", "--json")
	var got build
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil {
		t.Fatalf("version --json: %+v (%v)", r, err)
	}
	if want := readBuild(); got != want {
		t.Errorf("version --json = %+v, want %+v", got, want)
	}
}
