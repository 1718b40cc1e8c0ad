package deploy

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/upstream/stdio"
)

// stopBudget is the least time a supervisor must give the gateway between
// SIGTERM and SIGKILL: the drain, then each server's stop (stdin closed,
// StopGrace, SIGTERM to its group, StopGrace, SIGKILL; servers stop in
// parallel).
func stopBudget(cfg *config.Config) time.Duration {
	return cfg.Gateway.DrainTimeout + 2*stdio.DefaultStopGrace
}

// composeFacts is what the probe test needs from the compose file.
type composeFacts struct {
	healthPath string // Traefik's health check of the gateway
}

func checkCompose(t *testing.T) composeFacts {
	t.Helper()
	const path = "compose/docker-compose.yml"
	doc := readYAML(t, path)
	dig(t, doc, "services", "traefik")
	svc := dig(t, doc, "services", "mcpgate")

	// Built from one of our Dockerfiles, from the repository root.
	ctx := digString(t, svc, "build", "context")
	dockerfile := digString(t, svc, "build", "dockerfile")
	if abs, _ := filepath.Abs(filepath.Join("compose", ctx)); abs != mustAbs(t, "..") {
		t.Errorf("build.context %s is not the repository root", ctx)
	}
	img := checkDockerfile(t, filepath.Join("compose", ctx, dockerfile))

	// The config: mounted where the image reads it, loadable with exactly
	// the environment the service is given.
	var cfgFile string
	for _, v := range dig(t, svc, "volumes").([]any) {
		src, dst, _ := strings.Cut(v.(string), ":")
		dst, _, _ = strings.Cut(dst, ":")
		if dst == configPath {
			cfgFile = filepath.Join("compose", src)
		}
	}
	if cfgFile == "" {
		t.Fatalf("no volume mounts a config at %s", configPath)
	}
	env := map[string]string{}
	for k := range dig(t, svc, "environment").(map[string]any) {
		env[k] = "set-by-compose"
	}
	cfg := parseConfig(t, cfgFile, env)
	if !cfg.Gateway.TrustProxyHeaders {
		t.Errorf("%s: trustProxyHeaders is off: behind Traefik, host routing needs X-Forwarded-Host", cfgFile)
	}
	domain := cfg.Gateway.HostRouting.Domain
	if domain == "" {
		t.Fatalf("%s: no gateway.hostRouting.domain", cfgFile)
	}

	// Traefik routes every subdomain of the hostRouting domain, and only
	// those, to the port the gateway listens on.
	labels := dig(t, svc, "labels").(map[string]any)
	label := func(key string) string {
		t.Helper()
		v, ok := labels[key].(string)
		if !ok {
			t.Fatalf("label %s: missing or not a string", key)
		}
		return v
	}
	if label("traefik.enable") != "true" {
		t.Error("traefik.enable is not true")
	}
	var router, service string
	for k := range labels {
		if m := regexp.MustCompile(`^traefik\.http\.routers\.([^.]+)\.rule$`).FindStringSubmatch(k); m != nil {
			router = m[1]
		}
		if m := regexp.MustCompile(`^traefik\.http\.services\.([^.]+)\.loadbalancer\.server\.port$`).FindStringSubmatch(k); m != nil {
			service = m[1]
		}
	}
	if router == "" || service == "" {
		t.Fatalf("no traefik router rule or service port in %v", labels)
	}
	rule := label("traefik.http.routers." + router + ".rule")
	m := regexp.MustCompile("^HostRegexp\\(`(.+)`\\)$").FindStringSubmatch(rule)
	if m == nil {
		t.Fatalf("router rule %q is not HostRegexp(`...`)", rule)
	}
	// Compose reads $$ as a literal $ (a lone $ would be interpolated).
	expr := strings.ReplaceAll(m[1], "$$", "$")
	if strings.Contains(strings.ReplaceAll(m[1], "$$", ""), "$") {
		t.Errorf("router rule %q has a $ compose would interpolate: write $$", rule)
	}
	re, err := regexp.Compile(expr) // Traefik v3 uses Go's regexp
	if err != nil {
		t.Fatalf("router rule: %v", err)
	}
	for _, name := range cfg.Names() {
		if host := name + "." + domain; !re.MatchString(host) {
			t.Errorf("router rule %s does not match %s (server %q)", expr, host, name)
		}
	}
	for _, host := range []string{domain, "memory.evil.example", "memory." + domain + ".evil.example", "a.b." + domain} {
		if re.MatchString(host) {
			t.Errorf("router rule %s matches %s", expr, host)
		}
	}
	_, listenPort, err := net.SplitHostPort(cfg.Gateway.Listen)
	if err != nil {
		t.Fatal(err)
	}
	port := label("traefik.http.services." + service + ".loadbalancer.server.port")
	if port != listenPort || port != img.port {
		t.Errorf("traefik server port %s; the config listens on %s, the image on %s", port, listenPort, img.port)
	}
	checkComposeTLS(t, doc, label, router)
	var facts composeFacts
	facts.healthPath = label("traefik.http.services." + service + ".loadbalancer.healthcheck.path")

	grace, err := time.ParseDuration(digString(t, svc, "stop_grace_period"))
	if err != nil || grace <= stopBudget(cfg) {
		t.Errorf("stop_grace_period %v (%v), want more than drain and stop, %v", grace, err, stopBudget(cfg))
	}
	return facts
}

// checkComposeTLS: Traefik terminates TLS for the gateway's router on
// :443, published, and sends plain HTTP on :80 there (clients' connectors
// need https; the gateway behind speaks HTTP on the compose network).
func checkComposeTLS(t *testing.T, doc any, label func(string) string, router string) {
	t.Helper()
	traefik := dig(t, doc, "services", "traefik")
	args := map[string]bool{}
	for _, a := range dig(t, traefik, "command").([]any) {
		args[a.(string)] = true
	}
	ep := label("traefik.http.routers." + router + ".entrypoints")
	for _, want := range []string{
		"--entrypoints." + ep + ".address=:443",
		"--entrypoints.web.http.redirections.entrypoint.to=" + ep,
		"--entrypoints.web.http.redirections.entrypoint.scheme=https",
	} {
		if !args[want] {
			t.Errorf("traefik command lacks %s (router %s on entrypoint %s)", want, router, ep)
		}
	}
	if got := label("traefik.http.routers." + router + ".tls"); got != "true" {
		t.Errorf("router %s: tls %q, want \"true\"", router, got)
	}
	published := false
	for _, p := range dig(t, traefik, "ports").([]any) {
		published = published || strings.HasSuffix(p.(string), ":443")
	}
	if !published {
		t.Error("traefik does not publish port 443")
	}
}

func TestCompose(t *testing.T) {
	facts := checkCompose(t)
	if facts.healthPath != "/readyz" {
		t.Errorf("traefik health check path %q, want /readyz: traffic only to a ready gateway", facts.healthPath)
	}
}

// parseConfig loads a config file shipped under deploy/ with the
// gateway's own loader, as `mcpgate serve` would, given only env.
func parseConfig(t *testing.T, path string, env map[string]string) *config.Config {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseConfigData(t, path, data, env)
}

func parseConfigData(t *testing.T, name string, data []byte, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(data, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		t.Fatalf("%s does not load:\n%v", name, err)
	}
	if len(cfg.Servers) == 0 {
		t.Fatalf("%s: no servers", name)
	}
	return cfg
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
