package deploy

import (
	"net"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const chartDir = "helm/mcpgate"

func TestHelmChart(t *testing.T) {
	chart := readYAML(t, filepath.Join(chartDir, "Chart.yaml"))
	for k, want := range map[string]string{"apiVersion": "v2", "name": "mcpgate", "type": "application"} {
		if got := digString(t, chart, k); got != want {
			t.Errorf("Chart.yaml %s: %q, want %q", k, got, want)
		}
	}
	semver := regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	for _, k := range []string{"version", "appVersion"} {
		if v := digString(t, chart, k); !semver.MatchString(v) {
			t.Errorf("Chart.yaml %s: %q is not a semantic version", k, v)
		}
	}
}

// TestHelmValuesKeys: every .Values key a template reads, rendered or
// not on the default values, is in values.yaml.
func TestHelmValuesKeys(t *testing.T) {
	values := readYAML(t, filepath.Join(chartDir, "values.yaml"))
	files, _ := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	ref := regexp.MustCompile(`\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)`)
	n := 0
	for _, f := range files {
		for _, m := range ref.FindAllStringSubmatch(readFile(t, f), -1) {
			n++
			var cur any = values
			for _, k := range strings.Split(m[1][1:], ".") {
				mm, ok := cur.(map[string]any)
				if !ok {
					t.Errorf("%s: .Values%s: %s is under a value that is not a map", filepath.Base(f), m[1], k)
					break
				}
				if cur, ok = mm[k]; !ok {
					t.Errorf("%s: .Values%s is not in values.yaml", filepath.Base(f), m[1])
					break
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no .Values references found: the pattern is wrong")
	}
}

// helmFacts is what other tests need from a rendered chart.
type helmFacts struct {
	liveness, readiness string
}

// checkRendered checks a rendered chart's objects against each other, the
// image and the gateway, and loads its config.
func checkRendered(t *testing.T, r rendered) helmFacts {
	t.Helper()
	cm := r.object(t, "ConfigMap")
	cmName := digString(t, cm, "metadata", "name")

	dep := r.object(t, "Deployment")
	spec := dig(t, dep, "spec", "template", "spec")
	containers := dig(t, spec, "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	c := containers[0]

	// The environment the config sees: the Secret, by envFrom, and the
	// container's env.
	env := map[string]string{}
	if from, ok := c.(map[string]any)["envFrom"]; ok {
		name := digString(t, from.([]any)[0], "secretRef", "name")
		for _, s := range r.objects["Secret"] {
			if digString(t, s, "metadata", "name") == name {
				for k, v := range dig(t, s, "stringData").(map[string]any) {
					env[k] = v.(string)
				}
			}
		}
	}
	containerEnv(t, c.(map[string]any), env)
	cfg := loadChartConfig(t, r, env)

	// Listening on the containerPort named http, on every interface.
	args, _ := dig(t, c, "args").([]any)
	if len(args) != 2 || args[0] != "--listen" {
		t.Fatalf("args %v, want [--listen ADDR]", args)
	}
	host, port, err := net.SplitHostPort(args[1].(string))
	if err != nil || host != "" {
		t.Errorf("--listen %v: want :PORT", args[1])
	}
	ports := dig(t, c, "ports").([]any)
	if len(ports) != 1 || digString(t, ports[0], "name") != "http" || strconv.Itoa(dig(t, ports[0], "containerPort").(int)) != port {
		t.Errorf("ports %v, want one named http on %s", ports, port)
	}
	var facts helmFacts
	for _, p := range []struct {
		key  string
		path *string
	}{{"livenessProbe", &facts.liveness}, {"readinessProbe", &facts.readiness}} {
		*p.path = digString(t, c, p.key, "httpGet", "path")
		if digString(t, c, p.key, "httpGet", "port") != "http" {
			t.Errorf("%s does not probe the http port", p.key)
		}
	}

	// The ConfigMap mounted where the image's entrypoint reads it.
	mountDir := ""
	for _, v := range dig(t, spec, "volumes").([]any) {
		if cmRef, ok := v.(map[string]any)["configMap"]; ok && digString(t, cmRef, "name") == cmName {
			vol := digString(t, v, "name")
			for _, m := range dig(t, c, "volumeMounts").([]any) {
				if digString(t, m, "name") == vol {
					mountDir = digString(t, m, "mountPath")
				}
			}
		}
	}
	if mountDir+"/config.json" != configPath {
		t.Errorf("ConfigMap %s mounted at %q, want %s", cmName, mountDir, filepath.Dir(configPath))
	}

	grace := time.Duration(dig(t, spec, "terminationGracePeriodSeconds").(int)) * time.Second
	if grace <= stopBudget(cfg) {
		t.Errorf("terminationGracePeriodSeconds %v, want more than drain and stop, %v", grace, stopBudget(cfg))
	}
	if dig(t, spec, "securityContext", "runAsNonRoot") != true {
		t.Error("podSecurityContext.runAsNonRoot is not true")
	}

	svc := namedService(t, r, digString(t, dep, "metadata", "name"))
	if digString(t, dig(t, svc, "spec", "ports").([]any)[0], "targetPort") != "http" {
		t.Error("the Service does not target the http port")
	}
	if _, ok := r.files["NOTES.txt"]; !ok || strings.Contains(r.files["NOTES.txt"], "<no value>") {
		t.Errorf("NOTES.txt: %q", r.files["NOTES.txt"])
	}
	return facts
}

func defaultValues(t *testing.T) map[string]any {
	return readYAML(t, filepath.Join(chartDir, "values.yaml"))
}

func TestHelmDefaults(t *testing.T) {
	r := renderChart(t, chartDir, defaultValues(t))
	facts := checkRendered(t, r)
	if facts.liveness != "/healthz" || facts.readiness != "/readyz" {
		t.Errorf("probes: liveness %s, readiness %s; want /healthz and /readyz", facts.liveness, facts.readiness)
	}
	if len(r.objects["Secret"]) != 0 || len(r.objects["Ingress"]) != 0 {
		t.Errorf("default values make a Secret or Ingress: %v", r.objects)
	}
}

// TestHelmHostRouting renders ci/hostrouting-values.yaml: an Ingress for
// every subdomain of gateway.hostRouting.domain and an API key from a
// Secret the config reads.
func TestHelmHostRouting(t *testing.T) {
	values := mergeValues(defaultValues(t), readYAML(t, filepath.Join(chartDir, "ci", "hostrouting-values.yaml")))
	r := renderChart(t, chartDir, values)
	checkRendered(t, r)

	cfg := parseConfigData(t, "configmap", []byte(digString(t, r.object(t, "ConfigMap"), "data", "config.json")),
		map[string]string{"MCPGATE_TEAM_KEY": "x"})
	domain := cfg.Gateway.HostRouting.Domain
	if domain == "" || !cfg.Gateway.TrustProxyHeaders {
		t.Fatalf("hostRouting %q, trustProxyHeaders %v: want both", domain, cfg.Gateway.TrustProxyHeaders)
	}
	if cfg.Gateway.Auth == nil || len(cfg.Gateway.Auth.APIKeys) == 0 {
		t.Fatal("no API keys")
	}
	ing := r.object(t, "Ingress")
	var hosts []string
	for _, rule := range dig(t, ing, "spec", "rules").([]any) {
		hosts = append(hosts, digString(t, rule, "host"))
		for _, p := range dig(t, rule, "http", "paths").([]any) {
			if digString(t, p, "backend", "service", "name") != digString(t, r.object(t, "Service"), "metadata", "name") {
				t.Errorf("ingress path %v is not for the chart's Service", p)
			}
		}
	}
	if !slices.Contains(hosts, "*."+domain) {
		t.Errorf("ingress hosts %q lack *.%s", hosts, domain)
	}
}

// TestHelmConfigJSON: configJson is used verbatim (a Claude Desktop file
// pasted in).
func TestHelmConfigJSON(t *testing.T) {
	values := defaultValues(t)
	quickstart := readFile(t, "../examples/quickstart.json")
	values["configJson"] = quickstart
	r := renderChart(t, chartDir, values)
	got := digString(t, r.object(t, "ConfigMap"), "data", "config.json")
	if strings.TrimSpace(got) != strings.TrimSpace(quickstart) {
		t.Errorf("config.json = %q, want examples/quickstart.json verbatim", got)
	}
	checkRendered(t, r)
}

// TestHelmConfigChangeKeepsPods: by default a changed config renders the
// same pod template (no checksum annotation), so the pods are not rolled
// and the gateway's file watch applies it, keeping sessions; the config
// is mounted as a directory (a subPath mount is never updated). With
// restartOnConfigChange the pod template changes with the config.
func TestHelmConfigChangeKeepsPods(t *testing.T) {
	podTemplate := func(values map[string]any) any {
		return dig(t, renderChart(t, chartDir, values).object(t, "Deployment"), "spec", "template")
	}
	changed := func(restart bool) map[string]any {
		v := defaultValues(t)
		v["restartOnConfigChange"] = restart
		v["config"] = map[string]any{"mcpServers": map[string]any{"other": map[string]any{"command": "npx", "args": []any{"-y", "other"}}}}
		return v
	}
	base := defaultValues(t)
	if a, b := podTemplate(base), podTemplate(changed(false)); !reflect.DeepEqual(a, b) {
		t.Errorf("a config change alters the pod template (pods would restart, ending sessions):\n%v\n%v", a, b)
	}
	withRestart := defaultValues(t)
	withRestart["restartOnConfigChange"] = true
	if a, b := podTemplate(withRestart), podTemplate(changed(true)); reflect.DeepEqual(a, b) {
		t.Error("restartOnConfigChange: a config change leaves the pod template as it was")
	}
	for _, m := range dig(t, renderChart(t, chartDir, base).object(t, "Deployment"), "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["volumeMounts"].([]any) {
		if mm := m.(map[string]any); mm["name"] == "config" && mm["subPath"] != nil {
			t.Errorf("the config is mounted with subPath %v: never updated in place", mm["subPath"])
		}
	}
}
