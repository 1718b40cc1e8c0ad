package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The conformance suite's authorization server scenarios (alpha 0.2.0-alpha.12, `conformance
// authorization`; the stable 0.1.16 has none) against the gateway's own authorization server
// (issue 21): authorization-server-metadata-endpoint (RFC 8414 metadata) and
// authorization-code-grant (a public client's code flow with PKCE S256 and the resource, its
// redirect checked, iss included, the token response's headers and fields). The suite prints
// the authorization URL for a person to open and waits on http://127.0.0.1:PORT/callback; the
// test is that person. Measured: 2 scenarios, 3 checks, all passed (the metadata endpoint's 2, the
// code grant's 1).

func TestOAuthServerConformance(t *testing.T) {
	requirePeers(t, node22, conformanceJS["alpha"], everythingServer)
	g := startAuthGateway(t, nil)
	resource := g.resource("everything")
	_, port, err := net.SplitHostPort(testkit.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	c := publicClient(t, g.meta, "http://127.0.0.1:"+port+"/callback")

	outDir := t.TempDir()
	cmd := exec.Command(node22, conformanceJS["alpha"], "authorization", "--url", g.base, "--client-id", c.id,
		"--resource", resource, "-p", port, "-o", outDir)
	cmd.Dir = peersDir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	authorizeURL := make(chan string, 1)
	totals := make(chan [2]int, 1)
	p := startProcess(t, "conformance", cmd, func(line string) {
		if u := authorizeLine.FindString(line); u != "" {
			select {
			case authorizeURL <- u:
			default:
			}
		}
		if m := conformanceTotal.FindStringSubmatch(line); m != nil {
			passed, _ := strconv.Atoi(m[1])
			failed, _ := strconv.Atoi(m[2])
			select {
			case totals <- [2]int{passed, failed}:
			default:
			}
		}
	})
	t.Cleanup(func() { p.stop(t, syscall.SIGTERM, 10*time.Second, false) })

	select {
	case u := <-authorizeURL:
		to := newUserAgent(t).authorize(t, u, g.base, e2eUser, e2ePassword)
		resp, err := http.Get(to.String()) // the suite's callback server gets the code
		if err != nil {
			t.Fatalf("delivering the redirect %s: %v", to, err)
		}
		resp.Body.Close()
	case <-p.exited:
		t.Fatalf("the suite exited before printing an authorization URL: %v", p.waitErr)
	case <-time.After(2 * time.Minute):
		t.Fatal("the suite printed no authorization URL within 2 minutes")
	}
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("the suite did not finish within 2 minutes of the callback")
	}

	checks := readAuthorizationChecks(t, outDir)
	granted := false
	for _, ch := range checks {
		if ch.Status != "SUCCESS" && ch.Status != "INFO" {
			t.Errorf("check %s: %s\n%s", ch.ID, ch.Status, ch.describe())
		}
		granted = granted || (ch.ID == "authorization-code-grant" && ch.Status == "SUCCESS")
	}
	if !granted {
		t.Error("no successful authorization-code-grant check: the code flow was not judged")
	}
	var got [2]int
	select {
	case got = <-totals:
	default:
		t.Fatalf("the suite printed no Total line (exit: %v)", p.waitErr)
	}
	t.Logf("conformance authorization scenarios: %d passed, %d failed (%d checks)", got[0], got[1], len(checks))
	if got[1] != 0 || got[0] != len(checks) || p.waitErr != nil {
		t.Errorf("Total: %d passed, %d failed (exit %v); want all %d checks passed", got[0], got[1], p.waitErr, len(checks))
	}
}

// readAuthorizationChecks reads every checks.json the suite wrote under outDir.
func readAuthorizationChecks(t *testing.T, outDir string) []conformanceCheck {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(outDir, "*", "checks.json"))
	if err != nil || len(files) != 2 {
		t.Fatalf("checks.json files under %s: %q (%v); want one per scenario, 2", outDir, files, err)
	}
	var out []conformanceCheck
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var raw []map[string]any
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range raw {
			id, _ := c["id"].(string)
			status, _ := c["status"].(string)
			out = append(out, conformanceCheck{ID: id, Status: status, raw: c})
		}
	}
	return out
}
