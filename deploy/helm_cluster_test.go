package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// The objects of a cluster (templates/_config.tpl, service-peers.yaml,
// pdb.yaml, hpa.yaml and the cluster's parts of deployment.yaml).

// container returns the Deployment's pod spec and its one container.
func container(t *testing.T, r rendered) (pod, c map[string]any) {
	t.Helper()
	pod = dig(t, r.object(t, "Deployment"), "spec", "template", "spec").(map[string]any)
	return pod, dig(t, pod, "containers").([]any)[0].(map[string]any)
}

// envByName returns the container's env entries by name.
func envByName(t *testing.T, c map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	env, _ := c["env"].([]any)
	for _, e := range env {
		out[digString(t, e, "name")] = e.(map[string]any)
	}
	return out
}

// configDoc decodes the ConfigMap's config.json.
func configDoc(t *testing.T, r rendered) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(digString(t, r.object(t, "ConfigMap"), "data", "config.json")), &doc); err != nil {
		t.Fatalf("config.json: %v", err)
	}
	return doc
}

// namedService returns the Service called name.
func namedService(t *testing.T, r rendered, name string) map[string]any {
	t.Helper()
	for _, s := range r.objects["Service"] {
		if digString(t, s, "metadata", "name") == name {
			return s
		}
	}
	t.Fatalf("no Service %s among %d", name, len(r.objects["Service"]))
	return nil
}

// loadChartConfig loads the rendered config with the gateway's loader and
// the environment env. The key file that gateway.sealKeyFile names must
// be where the pod mounts the seal keys' Secret; the test puts a key file
// of its own there.
func loadChartConfig(t *testing.T, r rendered, env map[string]string) *config.Config {
	t.Helper()
	doc := configDoc(t, r)
	if gw, ok := doc["gateway"].(map[string]any); ok {
		if file, ok := gw["sealKeyFile"].(string); ok {
			if want := sealKeyMount(t, r); file != want {
				t.Errorf("gateway.sealKeyFile %q, want the mounted Secret's file %q", file, want)
			}
			keys := filepath.Join(t.TempDir(), "seal.json")
			if err := os.WriteFile(keys, []byte(`[{"id": "k1", "key": "`+strings.Repeat("A", 43)+`", "primary": true}]`), 0o600); err != nil {
				t.Fatal(err)
			}
			gw["sealKeyFile"] = keys
		}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return parseConfigData(t, "the chart's ConfigMap", data, env)
}

// A pod's environment as the kubelet would give it, for the tests: the
// downward API's fields and the keys of Secrets the chart does not make.
var (
	podFields  = map[string]string{"status.podIP": "10.1.2.3", "metadata.uid": "0d6f7a4e-5b1c-4c1e-9a57-3f1f0c2b7e11"}
	secretKeys = map[string]string{"url": "redis://redis.example:6379/0", "password": "redis-password"}
)

// containerEnv adds the container's env entries to env: values as they
// are, fieldRefs from podFields, secretKeyRefs from secretKeys.
func containerEnv(t *testing.T, c map[string]any, env map[string]string) {
	t.Helper()
	for name, e := range envByName(t, c) {
		switch {
		case e["value"] != nil:
			env[name] = toString(e["value"])
		case e["valueFrom"] != nil:
			from := e["valueFrom"].(map[string]any)
			if f, ok := from["fieldRef"]; ok {
				env[name] = podFields[digString(t, f, "fieldPath")]
			} else {
				env[name] = secretKeys[digString(t, from["secretKeyRef"], "key")]
			}
		}
	}
}

// sealKeyMount returns the path of the seal key file in the pod: where
// the volume of sealKeys.existingSecret is mounted, read-only, and the
// path its item gives the Secret's key.
func sealKeyMount(t *testing.T, r rendered) string {
	t.Helper()
	pod, c := container(t, r)
	secret := dig(t, r.values, "sealKeys", "existingSecret")
	for _, v := range dig(t, pod, "volumes").([]any) {
		s, ok := v.(map[string]any)["secret"]
		if !ok || dig(t, s, "secretName") != secret {
			continue
		}
		items := dig(t, s, "items").([]any)
		if len(items) != 1 || dig(t, items[0], "key") != dig(t, r.values, "sealKeys", "key") {
			t.Fatalf("seal key volume items %v, want the one key sealKeys.key", items)
		}
		for _, m := range dig(t, c, "volumeMounts").([]any) {
			if dig(t, m, "name") == dig(t, v, "name") {
				if dig(t, m, "readOnly") != true || m.(map[string]any)["subPath"] != nil {
					t.Errorf("seal keys mounted %v: want read-only, a directory (updated when the Secret changes)", m)
				}
				return digString(t, m, "mountPath") + "/" + digString(t, items[0], "path")
			}
		}
	}
	t.Fatalf("no volume of Secret %v mounted", secret)
	return ""
}

// envRef matches the ${VAR} and ${VAR:-default} references of a config.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// checkClusterBlock checks the rendered gateway.cluster: this pod's UID
// as instance, its IP and container port as advertise address, Redis from
// the environment the container is given, and every variable it reads
// set by the container (or given a default).
func checkClusterBlock(t *testing.T, r rendered) map[string]any {
	t.Helper()
	_, c := container(t, r)
	cl := dig(t, configDoc(t, r), "gateway", "cluster").(map[string]any)
	port := strconv.Itoa(dig(t, c, "ports").([]any)[0].(map[string]any)["containerPort"].(int))
	if cl["instance"] != "${POD_UID}" || cl["advertise"] != "${POD_IP}:"+port {
		t.Errorf("cluster instance %v, advertise %v; want ${POD_UID}, ${POD_IP}:%s", cl["instance"], cl["advertise"], port)
	}
	env := envByName(t, c)
	for name, path := range map[string]string{"POD_IP": "status.podIP", "POD_UID": "metadata.uid"} {
		if e, ok := env[name]; !ok || dig(t, e, "valueFrom", "fieldRef", "fieldPath") != path {
			t.Errorf("env %s: %v, want the downward API's %s", name, env[name], path)
		}
	}
	text, _ := json.Marshal(cl)
	for _, m := range envRef.FindAllStringSubmatch(string(text), -1) {
		if _, ok := env[m[1]]; !ok && m[2] == "" {
			t.Errorf("gateway.cluster reads ${%s}, which the container does not set", m[1])
		}
	}
	return cl
}

// TestHelmOneReplica: the default values render what they always did: one
// Service, no PDB or HPA, the config as written (no gateway.cluster, no
// sealKeyFile), no cluster environment or spread; besides, a rolling
// upgrade starts the new pod before stopping the old one, and a preStop
// sleep comes before SIGTERM.
func TestHelmOneReplica(t *testing.T) {
	values := defaultValues(t)
	r := renderChart(t, chartDir, values)
	checkRendered(t, r)
	for kind, want := range map[string]int{"Service": 1, "PodDisruptionBudget": 0, "HorizontalPodAutoscaler": 0, "Deployment": 1} {
		if got := len(r.objects[kind]); got != want {
			t.Errorf("%d objects of kind %s, want %d", got, kind, want)
		}
	}
	written, _ := json.MarshalIndent(values["config"], "", "  ")
	if got := digString(t, r.object(t, "ConfigMap"), "data", "config.json"); strings.TrimSpace(got) != string(written) {
		t.Errorf("config.json = %s, want config as written: %s", got, written)
	}
	pod, c := container(t, r)
	for _, name := range []string{"POD_IP", "POD_UID", "MCPGATE_REDIS_URL", "MCPGATE_REDIS_PASSWORD"} {
		if _, ok := envByName(t, c)[name]; ok {
			t.Errorf("env %s without cluster.enabled", name)
		}
	}
	if _, ok := pod["topologySpreadConstraints"]; ok {
		t.Error("topologySpreadConstraints without cluster.enabled")
	}
	checkStrategy(t, r)
	if got := dig(t, c, "lifecycle", "preStop", "sleep", "seconds"); got != values["preStopSleepSeconds"] {
		t.Errorf("preStop sleep %v, want preStopSleepSeconds %v", got, values["preStopSleepSeconds"])
	}
}

func checkStrategy(t *testing.T, r rendered) {
	t.Helper()
	s := dig(t, r.object(t, "Deployment"), "spec", "strategy")
	if dig(t, s, "type") != "RollingUpdate" || dig(t, s, "rollingUpdate", "maxUnavailable") != 0 || dig(t, s, "rollingUpdate", "maxSurge") != 1 {
		t.Errorf("strategy %v, want RollingUpdate with maxUnavailable 0, maxSurge 1", s)
	}
}

// TestHelmCluster renders ci/cluster-values.yaml, three replicas sharing
// sessions, and checks every object a cluster needs.
func TestHelmCluster(t *testing.T) {
	values := clusterValues(t)
	r := renderChart(t, chartDir, values)
	checkRendered(t, r)
	dep := r.object(t, "Deployment")
	selector := dig(t, dep, "spec", "selector", "matchLabels")
	if got := dig(t, dep, "spec", "replicas"); got != 3 {
		t.Errorf("replicas %v, want 3", got)
	}
	checkStrategy(t, r)

	// Spread over zones and hosts, never left pending for it.
	pod, c := container(t, r)
	var keys []string
	for _, tc := range dig(t, pod, "topologySpreadConstraints").([]any) {
		keys = append(keys, digString(t, tc, "topologyKey"))
		if dig(t, tc, "whenUnsatisfiable") != "ScheduleAnyway" || dig(t, tc, "maxSkew") != 1 ||
			!reflect.DeepEqual(dig(t, tc, "labelSelector", "matchLabels"), selector) {
			t.Errorf("topology spread %v: want maxSkew 1, ScheduleAnyway, the Deployment's selector", tc)
		}
	}
	if want := []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("topology keys %q, want %q", keys, want)
	}

	// The config: gateway.cluster for this pod, Redis from the Secret,
	// the seal keys from theirs; what the user wrote kept.
	cl := checkClusterBlock(t, r)
	if cl["sessionMaxAge"] != "12h" {
		t.Errorf("cluster.sessionMaxAge %v: the value written in config.gateway.cluster is lost", cl["sessionMaxAge"])
	}
	if want := map[string]any{"url": "${MCPGATE_REDIS_URL}", "password": "${MCPGATE_REDIS_PASSWORD:-}"}; !reflect.DeepEqual(cl["redis"], want) {
		t.Errorf("cluster.redis %v, want %v", cl["redis"], want)
	}
	env := envByName(t, c)
	redisSecret := dig(t, values, "cluster", "redis", "existingSecret")
	for name, key := range map[string]string{"MCPGATE_REDIS_URL": "url", "MCPGATE_REDIS_PASSWORD": "password"} {
		ref := dig(t, env[name], "valueFrom", "secretKeyRef")
		if dig(t, ref, "name") != redisSecret || dig(t, ref, "key") != key {
			t.Errorf("env %s from %v, want key %s of Secret %v", name, ref, key, redisSecret)
		}
	}
	if dig(t, env["MCPGATE_REDIS_PASSWORD"], "valueFrom", "secretKeyRef", "optional") != true {
		t.Error("the Redis Secret's password is not optional")
	}
	// As the gateway in the pod reads it.
	podEnv := map[string]string{}
	containerEnv(t, c, podEnv)
	cfg := loadChartConfig(t, r, podEnv)
	if len(cfg.Gateway.SealKeys) != 1 || cfg.Servers["memory"] == nil {
		t.Errorf("loaded config: %d seal keys, servers %v", len(cfg.Gateway.SealKeys), cfg.Servers)
	}
	got := cfg.Gateway.Cluster
	if got == nil || got.Instance != podFields["metadata.uid"] || got.Advertise != podFields["status.podIP"]+":8080" ||
		got.Redis == nil || got.Redis.URL != secretKeys["url"] || got.Redis.Password != secretKeys["password"] ||
		got.SessionMaxAge != 12*time.Hour {
		t.Errorf("loaded gateway.cluster %+v", got)
	}
	delete(podEnv, "MCPGATE_REDIS_PASSWORD") // the Secret's key is optional
	if cfg := loadChartConfig(t, r, podEnv); cfg.Gateway.Cluster.Redis.Password != "" {
		t.Errorf("redis password %q without the Secret's key", cfg.Gateway.Cluster.Redis.Password)
	}

	// The replicas by name, ready or not.
	peers := namedService(t, r, "demo-mcpgate-peers")
	if dig(t, peers, "spec", "clusterIP") != "None" || dig(t, peers, "spec", "publishNotReadyAddresses") != true ||
		!reflect.DeepEqual(dig(t, peers, "spec", "selector"), selector) ||
		dig(t, dig(t, peers, "spec", "ports").([]any)[0], "targetPort") != "http" {
		t.Errorf("peers Service %v: want headless, not-ready addresses published, the pods' http port", dig(t, peers, "spec"))
	}

	pdb := r.object(t, "PodDisruptionBudget")
	if pdb["apiVersion"] != "policy/v1" || dig(t, pdb, "spec", "maxUnavailable") != 1 ||
		!reflect.DeepEqual(dig(t, pdb, "spec", "selector", "matchLabels"), selector) {
		t.Errorf("PDB %v: want policy/v1, maxUnavailable 1, the Deployment's selector", pdb)
	}
	if n := len(r.objects["HorizontalPodAutoscaler"]); n != 0 {
		t.Errorf("%d HPAs without autoscaling.enabled", n)
	}

	// One replica of a cluster: no PDB to block a node drain with.
	values["replicaCount"] = 1
	if n := len(renderChart(t, chartDir, values).objects["PodDisruptionBudget"]); n != 0 {
		t.Errorf("%d PDBs for one replica", n)
	}
}

// TestHelmClusterRedisURL: a Redis URL given as a value reaches the
// container as MCPGATE_REDIS_URL, with no password; without Redis there
// is no redis block (the cluster works without one).
func TestHelmClusterRedisURL(t *testing.T) {
	values := mergeValues(clusterValues(t), map[string]any{"cluster": map[string]any{"redis": map[string]any{"existingSecret": "", "url": "redis://redis:6379/0"}}})
	r := renderChart(t, chartDir, values)
	checkRendered(t, r)
	cl := checkClusterBlock(t, r)
	if want := map[string]any{"url": "${MCPGATE_REDIS_URL}"}; !reflect.DeepEqual(cl["redis"], want) {
		t.Errorf("cluster.redis %v, want %v", cl["redis"], want)
	}
	_, c := container(t, r)
	env := envByName(t, c)
	if env["MCPGATE_REDIS_URL"]["value"] != "redis://redis:6379/0" {
		t.Errorf("env MCPGATE_REDIS_URL %v", env["MCPGATE_REDIS_URL"])
	}
	if _, ok := env["MCPGATE_REDIS_PASSWORD"]; ok {
		t.Error("MCPGATE_REDIS_PASSWORD without a Redis Secret")
	}

	values = mergeValues(clusterValues(t), map[string]any{"cluster": map[string]any{"redis": map[string]any{"existingSecret": ""}}})
	r = renderChart(t, chartDir, values)
	checkRendered(t, r)
	if cl := checkClusterBlock(t, r); cl["redis"] != nil {
		t.Errorf("cluster.redis %v without Redis", cl["redis"])
	}
	_, c = container(t, r)
	if _, ok := envByName(t, c)["MCPGATE_REDIS_URL"]; ok {
		t.Error("MCPGATE_REDIS_URL without Redis")
	}
}

// TestHelmClusterAdvertise: an advertise address written in
// config.gateway.cluster (an IPv6 pod's, bracketed) replaces the chart's,
// and loads with an IPv6 pod IP.
func TestHelmClusterAdvertise(t *testing.T) {
	values := mergeValues(clusterValues(t), map[string]any{"config": map[string]any{"gateway": map[string]any{"cluster": map[string]any{"advertise": "[${POD_IP}]:8080"}}}})
	r := renderChart(t, chartDir, values)
	if got := dig(t, configDoc(t, r), "gateway", "cluster", "advertise"); got != "[${POD_IP}]:8080" {
		t.Fatalf("advertise %v, want the config's", got)
	}
	_, c := container(t, r)
	env := map[string]string{}
	containerEnv(t, c, env)
	env["POD_IP"] = "fd00::1"
	if got := loadChartConfig(t, r, env).Gateway.Cluster.Advertise; got != "[fd00::1]:8080" {
		t.Errorf("advertise loads as %q", got)
	}
}

// TestHelmClusterConfigJSON: with configJson, the chart adds
// gateway.cluster and gateway.sealKeyFile to the file pasted in and keeps
// the rest of it.
func TestHelmClusterConfigJSON(t *testing.T) {
	values := clusterValues(t)
	values["configJson"] = readFile(t, "../examples/quickstart.json")
	r := renderChart(t, chartDir, values)
	checkClusterBlock(t, r)
	var want map[string]any
	if err := json.Unmarshal([]byte(values["configJson"].(string)), &want); err != nil {
		t.Fatal(err)
	}
	if got := configDoc(t, r)["mcpServers"]; !reflect.DeepEqual(got, want["mcpServers"]) {
		t.Errorf("mcpServers %v, want configJson's %v", got, want["mcpServers"])
	}
	checkRendered(t, r)
}

// TestHelmAutoscaling: the HPA (autoscaling/v2) targets the Deployment,
// which then leaves its replicas to it, on CPU, and scales down one pod at
// a time after a long calm; a PDB comes with it.
func TestHelmAutoscaling(t *testing.T) {
	values := mergeValues(clusterValues(t), map[string]any{"autoscaling": map[string]any{"enabled": true}})
	r := renderChart(t, chartDir, values)
	checkRendered(t, r)
	as := values["autoscaling"].(map[string]any)
	hpa := r.object(t, "HorizontalPodAutoscaler")
	if hpa["apiVersion"] != "autoscaling/v2" {
		t.Errorf("HPA apiVersion %v", hpa["apiVersion"])
	}
	dep := r.object(t, "Deployment")
	target := dig(t, hpa, "spec", "scaleTargetRef")
	if dig(t, target, "kind") != "Deployment" || dig(t, target, "name") != dig(t, dep, "metadata", "name") {
		t.Errorf("HPA targets %v", target)
	}
	if _, ok := dig(t, dep, "spec").(map[string]any)["replicas"]; ok {
		t.Error("the Deployment sets replicas under an HPA: every helm upgrade would reset them")
	}
	if dig(t, hpa, "spec", "minReplicas") != as["minReplicas"] || dig(t, hpa, "spec", "maxReplicas") != as["maxReplicas"] {
		t.Errorf("HPA bounds %v..%v, want %v..%v", dig(t, hpa, "spec", "minReplicas"), dig(t, hpa, "spec", "maxReplicas"), as["minReplicas"], as["maxReplicas"])
	}
	m := dig(t, hpa, "spec", "metrics").([]any)[0]
	if dig(t, m, "resource", "name") != "cpu" || dig(t, m, "resource", "target", "averageUtilization") != as["targetCPUUtilizationPercentage"] {
		t.Errorf("HPA metric %v", m)
	}
	down := dig(t, hpa, "spec", "behavior", "scaleDown")
	want := map[string]any{
		"stabilizationWindowSeconds": 600,
		"policies":                   []any{map[string]any{"type": "Pods", "value": 1, "periodSeconds": 300}},
	}
	if !reflect.DeepEqual(down, want) {
		t.Errorf("scaleDown %v, want %v", down, want)
	}
	if len(r.objects["PodDisruptionBudget"]) != 1 {
		t.Error("no PDB under an HPA")
	}
}
