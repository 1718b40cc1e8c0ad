package deploy

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

// configPath is where every package puts the config file: the images'
// ENTRYPOINT reads it, compose and the chart mount it there.
const configPath = "/etc/mcpgate/config.json"

var dockerfiles = []string{"docker/Dockerfile", "docker/Dockerfile.node"}

// defaultPort is the port of the gateway's default listen address.
func defaultPort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(config.Defaults().Listen)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// goMinor returns the major.minor Go version go.mod asks for.
func goMinor(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(readFile(t, "../go.mod"))
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return m[1]
}

// mainStringVars returns the package-level string variables of
// cmd/mcpgate: the only names -ldflags -X can set (it ignores others
// silently).
func mainStringVars(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../cmd/mcpgate/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

// dockerImage is what the tests of other packages need from a Dockerfile.
type dockerImage struct {
	entrypoint, cmd []string
	port            string // EXPOSE
	healthPath      string // the HEALTHCHECK's path, if any
}

// checkDockerfile checks one Dockerfile and returns its final stage's
// facts.
func checkDockerfile(t *testing.T, path string) dockerImage {
	df := parseDockerfile(t, path)
	if len(df.stages) < 2 {
		t.Fatalf("%s: %d stages, want a builder and a final stage", path, len(df.stages))
	}
	build, final := df.stages[0], df.stages[len(df.stages)-1]

	// The builder: the Go of go.mod, a static, reproducible binary, the
	// version, commit and build time from build arguments.
	if want := "golang:${GO_VERSION}"; !strings.HasPrefix(build.from, want) {
		t.Errorf("%s: builder FROM %s, want %s...", path, build.from, want)
	}
	if got := df.globalArgs["GO_VERSION"]; got != goMinor(t) {
		t.Errorf("%s: ARG GO_VERSION=%s, want %s as in go.mod", path, got, goMinor(t))
	}
	var goBuild string
	args := map[string]bool{}
	for _, in := range build.instrs {
		switch in.cmd {
		case "RUN":
			if strings.Contains(in.args, "go build") {
				goBuild = in.args
			}
		case "ARG":
			for _, f := range strings.Fields(in.args) {
				name, _, _ := strings.Cut(f, "=")
				args[name] = true
			}
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-buildvcs=false", "./cmd/mcpgate"} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("%s: go build lacks %s: %s", path, want, goBuild)
		}
	}
	vars := mainStringVars(t)
	xs := regexp.MustCompile(`-X main\.(\w+)=\$\{(\w+)\}`).FindAllStringSubmatch(goBuild, -1)
	set := map[string]bool{}
	for _, x := range xs {
		set[x[1]] = true
		if !slices.Contains(vars, x[1]) {
			t.Errorf("%s: -X main.%s: cmd/mcpgate has no string variable %s (has %q)", path, x[1], x[1], vars)
		}
		if !args[x[2]] {
			t.Errorf("%s: -X main.%s=${%s}: no ARG %s in the builder stage", path, x[1], x[2], x[2])
		}
	}
	for _, want := range []string{"version", "commit", "buildTime"} {
		if !set[want] {
			t.Errorf("%s: go build does not set main.%s with -X", path, want)
		}
	}
	// .git stays out of the context (hence -buildvcs=false and COMMIT).
	ignore := readFile(t, path+".dockerignore")
	if !slices.Contains(strings.Fields(ignore), ".git") {
		t.Errorf("%s.dockerignore does not leave out .git", path)
	}

	// The final stage: the binary from the builder, a non-root user, the
	// default port, serve --config at the shared path.
	var bin string
	for _, in := range final.instrs {
		if in.cmd == "COPY" && strings.HasPrefix(in.args, "--from="+build.name+" ") {
			f := strings.Fields(in.args)
			bin = f[len(f)-1]
		}
	}
	if build.name == "" || bin == "" {
		t.Fatalf("%s: the final stage copies nothing from the named builder stage", path)
	}
	user, ok := final.last("USER")
	if !ok {
		t.Errorf("%s: the final stage sets no USER: it would run as root", path)
	} else if u, _, _ := strings.Cut(user.args, ":"); u == "root" || u == "0" {
		t.Errorf("%s: USER %s", path, user.args)
	}
	var img dockerImage
	if in, ok := final.last("EXPOSE"); !ok || in.args != defaultPort(t) {
		t.Errorf("%s: EXPOSE %q, want the default port %s", path, in.args, defaultPort(t))
	} else {
		img.port = in.args
	}
	ep, ok := final.last("ENTRYPOINT")
	if !ok {
		t.Fatalf("%s: no ENTRYPOINT", path)
	}
	img.entrypoint = execForm(t, path, ep)
	i := slices.Index(img.entrypoint, bin)
	if i < 0 || !slices.Equal(img.entrypoint[i+1:], []string{"serve", "--config", configPath}) {
		t.Errorf("%s: ENTRYPOINT %q, want [... %s serve --config %s]", path, img.entrypoint, bin, configPath)
	}
	if cmd, ok := final.last("CMD"); ok {
		img.cmd = execForm(t, path, cmd)
	}
	if len(img.cmd) != 2 || img.cmd[0] != "--listen" {
		t.Fatalf("%s: CMD %q, want [--listen ADDR]", path, img.cmd)
	}
	if err := config.CheckListen(img.cmd[1]); err != nil {
		t.Errorf("%s: CMD --listen: %v", path, err)
	}
	if host, port, _ := net.SplitHostPort(img.cmd[1]); port != img.port || (host != "" && !net.ParseIP(host).IsUnspecified()) {
		t.Errorf("%s: CMD --listen %s, want every interface on the EXPOSEd port %s", path, img.cmd[1], img.port)
	}
	if hc, ok := final.last("HEALTHCHECK"); ok {
		m := regexp.MustCompile(`http://127\.0\.0\.1:(\d+)(/[a-z]+)`).FindStringSubmatch(hc.args)
		if m == nil || m[1] != img.port {
			t.Errorf("%s: HEALTHCHECK %s does not ask 127.0.0.1:%s", path, hc.args, img.port)
		} else {
			img.healthPath = m[2]
		}
	}
	return img
}

func TestDockerfiles(t *testing.T) {
	for _, path := range dockerfiles {
		t.Run(filepath.Base(path), func(t *testing.T) { checkDockerfile(t, path) })
	}
}

// TestDockerfileDistroless: the default image has nothing but the binary
// (no shell, so no HEALTHCHECK: the orchestrator probes).
func TestDockerfileDistroless(t *testing.T) {
	df := parseDockerfile(t, "docker/Dockerfile")
	final := df.stages[len(df.stages)-1]
	if !strings.HasPrefix(final.from, "gcr.io/distroless/static") && final.from != "scratch" {
		t.Errorf("final stage FROM %s, want distroless/static or scratch", final.from)
	}
	if _, ok := final.last("HEALTHCHECK"); ok {
		t.Error("HEALTHCHECK in an image without a shell or curl")
	}
	if _, ok := final.last("RUN"); ok {
		t.Error("RUN in the final stage: the image has no shell")
	}
}

// TestDockerfileNode: the Node image reaps npx's grandchildren with an
// init and checks its own health.
func TestDockerfileNode(t *testing.T) {
	img := checkDockerfile(t, "docker/Dockerfile.node")
	if !strings.HasSuffix(img.entrypoint[0], "tini") {
		t.Errorf("ENTRYPOINT %q does not start with tini", img.entrypoint)
	}
	if img.healthPath != "/healthz" {
		t.Errorf("HEALTHCHECK path %q, want /healthz (liveness)", img.healthPath)
	}
	df := parseDockerfile(t, "docker/Dockerfile.node")
	if from := df.stages[len(df.stages)-1].from; !strings.HasPrefix(from, "node:") {
		t.Errorf("final stage FROM %s, want a node image", from)
	}
	if _, err := os.Stat("docker/Dockerfile.node.dockerignore"); err != nil {
		t.Error(err)
	}
}

// TestDockerfileGoBuild runs the builder stage's go build as written in
// each Dockerfile, build arguments filled in, and checks that the binary
// reports them: a quoting slip in -ldflags would drop them silently.
func TestDockerfileGoBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, path := range dockerfiles {
		t.Run(filepath.Base(path), func(t *testing.T) {
			df := parseDockerfile(t, path)
			var run string
			for _, in := range df.stages[0].instrs {
				if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
					run = in.args
				}
			}
			// RUN's own flags (--mount=...) are BuildKit's, not the shell's.
			for strings.HasPrefix(run, "--") {
				_, run, _ = strings.Cut(run, " ")
				run = strings.TrimSpace(run)
			}
			bin := filepath.Join(t.TempDir(), "mcpgate")
			run = strings.Replace(run, "-o /out/mcpgate", "-o "+bin, 1)
			cmd := exec.Command(sh, "-c", run)
			cmd.Dir = ".." // the build context: the repository root
			cmd.Env = append(os.Environ(),
				"TARGETOS="+runtime.GOOS, "TARGETARCH="+runtime.GOARCH,
				"VERSION=v9.8.7", "COMMIT=0123abcd", "BUILD_TIME=2026-01-02T03:04:05Z")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", run, err, out)
			}
			out, err := exec.Command(bin, "version", "--json").Output()
			if err != nil {
				t.Fatal(err)
			}
			var got struct{ Version, Commit, BuildTime string }
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got.Version != "v9.8.7" || got.Commit != "0123abcd" || got.BuildTime != "2026-01-02T03:04:05Z" {
				t.Errorf("mcpgate version --json = %s", out)
			}
		})
	}
}
