package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// conformanceSuite is one run of the conformance suite.
type conformanceSuite struct {
	name string   // subtest name
	pkg  string   // which installed package runs it: a key of conformanceJS
	args []string // extra arguments of "server"
	// requirements, if set, makes this a requirement-set run (--requirements REV): the suite
	// runs exactly the scenarios that revision requires, at its wire version, plus a few it
	// reports but never scores (extensions, pending ones). It is judged by its scored scenarios
	// only, against an optional expected-failures baseline (see runRequirements).
	requirements string
	// judged are scenarios of the requirement set that the suite runs but does not score
	// (pending ones) and that the gateway must pass all the same: they are judged as the
	// scored ones are.
	judged []string
}

// suites are the conformance suite runs: the stable release, the alpha restricted to the
// 2025-11-25 spec, and the alpha's requirement set for the 2026-07-28 ("modern", stateless)
// revision.
var suites = []conformanceSuite{
	{name: "stable", pkg: "stable"},
	{name: "alpha", pkg: "alpha", args: []string{"--spec-version", "2025-11-25"}},
	{name: "required-2025-11-25", pkg: "alpha", requirements: "2025-11-25"},
	// http-custom-header-server-validation is pending in the alpha: the Mcp-Param-* headers of
	// tools whose inputSchema asks for them are checked by the gateway (the stdio server never
	// sees them).
	{name: "modern", pkg: "alpha", requirements: modernRevision, judged: []string{"http-custom-header-server-validation"}},
}

// modernRevision is the stateless revision: its requirement set runs without sessions.
const modernRevision = "2026-07-28"

// conformanceTimeout bounds one suite run; passing runs take a few seconds, but each scenario
// that hangs costs the suite's own 30s timeout.
const conformanceTimeout = 4 * time.Minute

var conformanceTotal = regexp.MustCompile(`(?m)^Total: (\d+) passed, (\d+) failed`)

// translatedModernBaseline lists the scored 2026-07-28 scenarios and checks that fail when the
// gateway translates stateless requests for a server pinned to the session eras; each entry
// says why.
const translatedModernBaseline = "testdata/conformance-2026-07-28-translated.yaml"

// conformanceSetups are the gateway configurations the suites run through: the conformance
// server in each isolation mode, and pinned to the session eras ("protocol": "legacy"), so that
// the stateless requests take the translation path (and its input-request bridge) instead of
// going to a process of the server's own 2026-07-28 era.
var conformanceSetups = []struct {
	name, isolation, protocol string
	gateway                   map[string]any
	modernBaseline            string // "" when every scored 2026-07-28 scenario must pass
	requiredBaseline          string // the same for the 2025-11-25 requirement set
	legacyOnly                string // why the stable and alpha suites are skipped, if they are
}{
	{name: "shared"},
	{name: "session", isolation: "session"},
	// The suite does not retry every input request it gets; a request parked for input keeps
	// the server's other requests from being attributed (shared mode's rule), so it is parked
	// briefly here.
	{name: "translated", protocol: "legacy", gateway: map[string]any{"inputWait": "300ms"}, modernBaseline: translatedModernBaseline},
	// Pinned to 2026-07-28: the gateway runs no initialized process, so the session-era
	// suites go through the reverse bridge (initialize answered from server/discover, each
	// request a stateless one, input_required turned into server requests to the client).
	{name: "reverse", protocol: "2026-07-28", requiredBaseline: reverseRequiredBaseline,
		legacyOnly: "the reverse bridge is judged by the 2025-11-25 requirement set (the stable and alpha runs repeat its scenarios)"},
}

// remoteTranslatedBaseline lists the scored 2026-07-28 scenarios that fail when the gateway
// translates them for a remote of the session eras; each entry says why.
const remoteTranslatedBaseline = "testdata/conformance-2026-07-28-remote-translated.yaml"

// reverseRequiredBaseline lists the scored 2025-11-25 scenarios that fail through the reverse
// bridge because of what the server does on 2026-07-28; each entry says why.
const reverseRequiredBaseline = "testdata/conformance-2025-11-25-reverse.yaml"

// TestConformance runs the official MCP conformance suite against the Go SDK's conformance
// server behind the gateway, in each setup. The same server served directly passes everything
// (TestConformanceBaseline), so any failure here is the gateway's.
func TestConformance(t *testing.T) {
	requirePeers(t, node22, everythingServer, conformanceJS["stable"], conformanceJS["alpha"])
	for _, setup := range conformanceSetups {
		t.Run(setup.name, func(t *testing.T) {
			base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
				"everything": {Command: everythingServer, Isolation: setup.isolation, Protocol: setup.protocol},
			}, Gateway: setup.gateway})
			url := base + "/servers/everything/mcp"
			for _, s := range suites {
				t.Run(s.name, func(t *testing.T) {
					if s.requirements != modernRevision && setup.protocol == "legacy" {
						t.Skip("the session-era suites run as in shared mode (protocol changes only stateless requests)")
					}
					if s.requirements == "" && setup.legacyOnly != "" {
						t.Skip(setup.legacyOnly)
					}
					baseline := setup.modernBaseline
					if s.requirements == "2025-11-25" {
						baseline = setup.requiredBaseline
					}
					runConformance(t, s, url, baseline)
				})
			}
		})
	}
}

// TestConformanceRemote runs the suites through a chain: the gateway with a remote Streamable
// HTTP upstream, the Go SDK's conformance server served over HTTP.
//
// The session-era suites go to a stateful server (one upstream session per client session).
// The 2026-07-28 suite goes to the server in its stateless mode, which speaks that revision:
// the gateway finds so with server/discover and forwards each request as it came, one POST
// each; every scored scenario must pass.
func TestConformanceRemote(t *testing.T) {
	requirePeers(t, node22, everythingServer, conformanceJS["stable"], conformanceJS["alpha"])
	stateless := startEverythingHTTP(t, true)
	base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
		"remote":         {Type: "http", URL: startEverythingHTTP(t, false)},
		"remote-modern":  {Type: "http", URL: stateless},
		"remote-reverse": {Type: "http", URL: stateless, Protocol: "2026-07-28"},
	}})
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			url := base + "/servers/remote/mcp"
			if s.requirements == modernRevision {
				url = base + "/servers/remote-modern/mcp"
			}
			runConformance(t, s, url, "")
		})
	}
	// The stateful server (it refuses a POST without a session): the 2026-07-28 suite is
	// translated through one upstream session the gateway initializes.
	t.Run("translated/modern", func(t *testing.T) {
		modern := suites[slices.IndexFunc(suites, func(s conformanceSuite) bool { return s.requirements == modernRevision })]
		runConformance(t, modern, base+"/servers/remote/mcp", remoteTranslatedBaseline)
	})
	// The same stateless server pinned to 2026-07-28: session-era clients go through the reverse
	// bridge, each request a stateless POST to the remote.
	t.Run("reverse/required-2025-11-25", func(t *testing.T) {
		required := suites[slices.IndexFunc(suites, func(s conformanceSuite) bool { return s.requirements == "2025-11-25" })]
		runConformance(t, required, base+"/servers/remote-reverse/mcp", reverseRequiredBaseline)
	})
}

// TestConformanceBaseline runs the suites against the Go SDK's conformance server served
// directly over Streamable HTTP, without the gateway: stateful for the session-era suites,
// stateless (its default) for 2026-07-28, where every scored scenario must pass. It proves that
// the suite, Node 22 and the server are installed and agree, so that a TestConformance failure
// points at the gateway.
func TestConformanceBaseline(t *testing.T) {
	requirePeers(t, node22, everythingServer, conformanceJS["stable"], conformanceJS["alpha"])
	stateful := startEverythingHTTP(t, false)
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			url := stateful
			if s.requirements == modernRevision {
				url = startEverythingHTTP(t, true)
			}
			runConformance(t, s, url, "")
		})
	}
}

// startEverythingHTTP serves the Go SDK's conformance server over Streamable HTTP until the test
// ends and returns its endpoint URL. stateless selects the server's 2026-07-28 mode (no
// sessions; its default); otherwise it keeps sessions, as the session-era suites need.
func startEverythingHTTP(t *testing.T, stateless bool) string {
	t.Helper()
	addr := testkit.FreeAddr(t)
	cmd := exec.Command(everythingServer, "-http", addr, "-stateless="+strconv.FormatBool(stateless))
	p := startProcess(t, "everything-server", cmd, nil)
	t.Cleanup(func() { p.stop(t, syscall.SIGTERM, 10*time.Second, false) })
	waitListening(t, p, addr)
	return "http://" + addr + "/mcp"
}

// runConformance runs one conformance suite against url. A session-era run must pass every
// check (and at least one must run); a requirement-set run is judged by runRequirements, with
// baseline (a path relative to this package, or "") as its expected failures. A failure
// message names the failing scenarios and the checks that failed or warned, from their
// checks.json.
func runConformance(t *testing.T, s conformanceSuite, url, baseline string) {
	t.Helper()
	if s.requirements != "" {
		runRequirements(t, s, url, baseline)
		return
	}
	if baseline != "" {
		t.Fatalf("suite %s: an expected-failures baseline is only supported for requirement-set runs", s.name)
	}
	outDir := t.TempDir()
	args := append([]string{conformanceJS[s.pkg], "server", "--url", url, "-o", outDir}, s.args...)
	start := time.Now()
	out, err := runNode(t, peersDir, conformanceTimeout, args...)
	elapsed := time.Since(start).Round(time.Millisecond)

	m := conformanceTotal.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s suite against %s printed no Total line (exit: %v); output:\n%s", s.name, url, err, out)
	}
	passed, _ := strconv.Atoi(m[1])
	failed, _ := strconv.Atoi(m[2])
	t.Logf("%s conformance against %s: %d passed, %d failed (%v)", s.name, url, passed, failed, elapsed)
	if failed == 0 && passed > 0 {
		if err != nil {
			t.Logf("suite exited with %v despite 0 failures", err)
		}
		return
	}

	results, rerr := readConformanceResults(outDir)
	var report strings.Builder
	fmt.Fprintf(&report, "%s conformance against %s: %d passed, %d failed\n", s.name, url, passed, failed)
	if rerr != nil {
		fmt.Fprintf(&report, "(reading checks: %v)\n", rerr)
	}
	for line := range strings.Lines(out) {
		if !strings.HasPrefix(line, "✗") {
			continue
		}
		report.WriteString(line)
		// "✗ scenario-name: P passed, F failed"
		scenario, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "✗")), ":")
		checks, ok := results[scenario]
		if !ok {
			fmt.Fprintf(&report, "    (no checks.json for %s under %s)\n", scenario, outDir)
		}
		for _, c := range checks {
			if c.Status != "SUCCESS" && c.Status != "INFO" {
				report.WriteString(c.describe())
			}
		}
	}
	if passed == 0 {
		fmt.Fprintf(&report, "no check passed; full output:\n%s", out)
	}
	t.Error(report.String())
}

// runRequirements runs the requirement set s.requirements against url and judges its scored
// scenarios, those the revision requires: every FAILURE or WARNING among their checks must be
// listed in baseline (the suite's exit code counts warnings of scored scenarios too once a
// baseline is given), and every baseline entry must still fail: one that passes fails the test,
// to be removed from the baseline. Without a baseline every scored scenario must pass, warnings
// included. Scenarios the suite runs but does not score (extensions such as tasks, pending
// ones) are logged and never judged.
//
// The suite applies the baseline itself (--expected-failures) and reports unexpected failures
// and stale entries; the test reaches the same verdict from the checks.json files (stricter: it
// also flags a baseline entry whose check is no longer reported, or that names no scored
// scenario), reports it precisely, and fails if the suite's exit code disagrees.
func runRequirements(t *testing.T, s conformanceSuite, url, baseline string) {
	t.Helper()
	scored := append(requiredServerScenarios(t, s), s.judged...)
	var expected []baselineEntry
	outDir := t.TempDir()
	args := []string{conformanceJS[s.pkg], "server", "--url", url, "--requirements", s.requirements, "-o", outDir}
	args = append(args, s.args...)
	if baseline != "" {
		path, err := filepath.Abs(baseline) // node runs in peersDir
		if err != nil {
			t.Fatal(err)
		}
		if expected, err = readBaseline(path); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--expected-failures", path)
	}
	start := time.Now()
	out, err := runNode(t, peersDir, conformanceTimeout, args...)
	elapsed := time.Since(start).Round(time.Millisecond)
	exitCode := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() < 0 {
			t.Fatalf("%s suite against %s did not finish: %v; output:\n%s", s.name, url, err, out)
		}
		exitCode = ee.ExitCode()
	}
	results, rerr := readConformanceResults(outDir)
	if rerr != nil {
		t.Fatalf("%s suite against %s: %v; output:\n%s", s.name, url, rerr, out)
	}

	var (
		problems   []string // what fails the test
		passing    int      // scored scenarios without a failure or warning
		expFailing []string // baseline entries that fail, as they should
	)
	scenarioEntries := map[string]bool{}         // scenario -> listed as a whole
	checkEntries := map[string]map[string]bool{} // scenario -> listed check ids
	for _, e := range expected {
		if !slices.Contains(scored, e.scenario) {
			problems = append(problems, fmt.Sprintf("baseline entry %q (line %d) names no scored scenario of %s: remove it from the baseline %s",
				e, e.line, s.requirements, baseline))
			continue
		}
		if e.check == "" {
			scenarioEntries[e.scenario] = true
			continue
		}
		if checkEntries[e.scenario] == nil {
			checkEntries[e.scenario] = map[string]bool{}
		}
		checkEntries[e.scenario][e.check] = true
	}
	for _, sc := range scored {
		checks, ok := results[sc]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: scored scenario left no checks.json under %s (not run?)", sc, outDir))
			continue
		}
		checks = worstPerCheck(checks)
		var bad []conformanceCheck
		succeeded := false
		for _, c := range checks {
			switch c.Status {
			case "FAILURE", "WARNING":
				bad = append(bad, c)
			case "SUCCESS":
				succeeded = true
			}
		}
		if len(bad) == 0 && succeeded {
			passing++
		}
		if scenarioEntries[sc] {
			if len(bad) == 0 {
				problems = append(problems, fmt.Sprintf("%s: expected to fail but passes now: remove it from the baseline %s", sc, baseline))
			} else {
				expFailing = append(expFailing, sc)
			}
			continue
		}
		if len(bad) == 0 && !succeeded {
			problems = append(problems, fmt.Sprintf("%s: no check succeeded", sc))
		}
		for _, c := range bad {
			if checkEntries[sc][c.ID] {
				expFailing = append(expFailing, sc+":"+c.ID)
				continue
			}
			problems = append(problems, fmt.Sprintf("%s: check %s: %s (not in the baseline)\n%s", sc, c.ID, c.Status, c.describe()))
		}
		for id := range checkEntries[sc] {
			i := slices.IndexFunc(bad, func(c conformanceCheck) bool { return c.ID == id })
			if i >= 0 {
				continue
			}
			status := "no longer reported"
			if j := slices.IndexFunc(checks, func(c conformanceCheck) bool { return c.ID == id }); j >= 0 {
				status = "now " + checks[j].Status
			}
			problems = append(problems, fmt.Sprintf("%s:%s: expected to fail but %s: remove it from the baseline %s", sc, id, status, baseline))
		}
	}

	// Scenarios run but not scored: logged, never judged.
	var notScored []string
	for name, checks := range results {
		if slices.Contains(scored, name) {
			continue
		}
		state := "pass"
		if slices.ContainsFunc(checks, func(c conformanceCheck) bool { return c.Status == "FAILURE" }) {
			state = "fail"
		}
		notScored = append(notScored, name+" "+state)
	}
	slices.Sort(notScored)
	slices.Sort(expFailing)

	total := "no Total line"
	if m := conformanceTotal.FindStringSubmatch(out); m != nil {
		total = strings.TrimSuffix(m[0], "\n")
	}
	t.Logf("%s conformance (requirements %s) against %s: %d/%d scored scenarios pass; %d expected failures; suite exit %d; all scenarios: %s (%v)",
		s.name, s.requirements, url, passing, len(scored), len(expFailing), exitCode, total, elapsed)
	if len(expFailing) > 0 {
		t.Logf("expected failures (baseline %s):\n  %s", baseline, strings.Join(expFailing, "\n  "))
	}
	t.Logf("not scored for %s (reported only): %s", s.requirements, strings.Join(notScored, ", "))

	switch {
	case len(problems) > 0:
		t.Errorf("%s conformance (requirements %s) against %s: %d/%d scored scenarios pass, suite exit %d; %d problem(s):\n%s",
			s.name, s.requirements, url, passing, len(scored), exitCode, len(problems), strings.Join(problems, "\n"))
	case exitCode != 0:
		t.Errorf("%s conformance (requirements %s) against %s: the suite exited %d though every scored check is passing or expected; output:\n%s",
			s.name, s.requirements, url, exitCode, out)
	}
}

// requiredServerScenarios returns the server scenarios the requirement set s.requirements
// scores, from the suite's own "list --server --requirements REV".
func requiredServerScenarios(t *testing.T, s conformanceSuite) []string {
	t.Helper()
	out, err := runNode(t, peersDir, time.Minute, conformanceJS[s.pkg], "list", "--server", "--requirements", s.requirements)
	if err != nil {
		t.Fatalf("listing the scenarios of requirements %s: %v; output:\n%s", s.requirements, err, out)
	}
	// "Server scenarios (test against a server):" then "  - name" lines up to a blank line.
	var scenarios []string
	in := false
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "Server scenarios"):
			in = true
		case in && strings.HasPrefix(line, "  - "):
			scenarios = append(scenarios, strings.TrimPrefix(line, "  - "))
		default:
			in = false
		}
	}
	if len(scenarios) == 0 {
		t.Fatalf("requirements %s lists no server scenario; output:\n%s", s.requirements, out)
	}
	return scenarios
}

// conformanceCheck is one entry of a scenario's checks.json.
type conformanceCheck struct {
	ID     string
	Status string // SUCCESS, FAILURE, WARNING, INFO, SKIPPED
	raw    map[string]any
}

// describe formats the check for a failure report, indented.
func (c conformanceCheck) describe() string {
	m := maps.Clone(c.raw)
	delete(m, "specReferences") // links to the spec: long and the same every run
	js, _ := json.MarshalIndent(m, "    ", "  ")
	return "    " + string(js) + "\n"
}

// worstPerCheck keeps one entry per check id, its worst status (FAILURE, then WARNING, then
// SUCCESS), as the suite's baseline comparison does; INFO entries are dropped.
func worstPerCheck(checks []conformanceCheck) []conformanceCheck {
	rank := map[string]int{"FAILURE": 3, "WARNING": 2, "SUCCESS": 1}
	var out []conformanceCheck
	at := map[string]int{}
	for _, c := range checks {
		if c.Status == "INFO" {
			continue
		}
		i, ok := at[c.ID]
		if !ok {
			at[c.ID] = len(out)
			out = append(out, c)
		} else if rank[c.Status] >= rank[out[i].Status] {
			out[i] = c
		}
	}
	return out
}

// scenarioDir matches a result directory the suite writes under -o: "server-SCENARIO-TIMESTAMP".
var scenarioDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// readConformanceResults reads every scenario's checks.json under outDir, by scenario name.
func readConformanceResults(outDir string) (map[string][]conformanceCheck, error) {
	entries, err := os.ReadDir(outDir)
	if err != nil {
		return nil, err
	}
	results := map[string][]conformanceCheck{}
	for _, e := range entries {
		m := scenarioDir.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(outDir, e.Name(), "checks.json"))
		if err != nil {
			return nil, err
		}
		var raw []map[string]any
		if err := json.Unmarshal(data, &raw); err != nil {
			return nil, fmt.Errorf("%s: %v", e.Name(), err)
		}
		for _, c := range raw {
			id, _ := c["id"].(string)
			status, _ := c["status"].(string)
			results[m[1]] = append(results[m[1]], conformanceCheck{ID: id, Status: status, raw: c})
		}
		if _, ok := results[m[1]]; !ok {
			results[m[1]] = []conformanceCheck{}
		}
	}
	return results, nil
}

// baselineEntry is one expected failure: a whole scenario, or one check of it.
type baselineEntry struct {
	scenario, check string
	line            int
}

func (e baselineEntry) String() string {
	if e.check == "" {
		return e.scenario
	}
	return e.scenario + ":" + e.check
}

// readBaseline reads the server entries of an expected-failures file, in the subset of YAML the
// suite's --expected-failures takes that these baselines use: a "server:" key followed by
// "- SCENARIO" or "- SCENARIO:CHECK-ID" items, with # comments and blank lines. Anything else is
// an error rather than a guess, so this reading and the suite's cannot drift apart.
func readBaseline(path string) ([]baselineEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var entries []baselineEntry
	seen := map[string]bool{}
	inServer := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimRight(line, " \t")
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
		case line == "server:", line == "server: []":
			inServer = true
		case inServer && strings.HasPrefix(trimmed, "- "):
			item := strings.TrimSpace(strings.TrimPrefix(trimmed, "- "))
			scenario, check, _ := strings.Cut(item, ":")
			if scenario == "" || strings.ContainsAny(item, " \t\"'") || (strings.Contains(item, ":") && check == "") {
				return nil, fmt.Errorf("%s:%d: %q is not SCENARIO or SCENARIO:CHECK-ID", path, n, item)
			}
			if seen[item] {
				return nil, fmt.Errorf("%s:%d: %s listed twice", path, n, item)
			}
			seen[item] = true
			entries = append(entries, baselineEntry{scenario: scenario, check: check, line: n})
		default:
			return nil, fmt.Errorf("%s:%d: unsupported line %q (only a server: list of entries)", path, n, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.check != "" && seen[e.scenario] {
			return nil, fmt.Errorf("%s:%d: %s is redundant: the whole scenario %s is listed", path, e.line, e, e.scenario)
		}
	}
	return entries, nil
}
