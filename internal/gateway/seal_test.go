package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// sealKey is a config seal key of id whose secret is b repeated.
func sealKey(id string, b byte, primary bool) config.SealKey {
	return config.SealKey{ID: id, Secret: bytes.Repeat([]byte{b}, 32), Primary: primary}
}

// A reload rotates the seal keys in place: a value sealed before the
// rotation keeps opening while its key is listed, and once its key is
// retired it gets the answer a forged value gets. Without keys, the
// random key outlives a reload that configures none. The values are a
// passthrough server's requestState, sealed for its principal.
func TestReloadRotatesSealKeys(t *testing.T) {
	srv := fakeServer("m", testkit.FakeOptions{Modern: true})
	srv.Protocol = config.ProtocolModern
	cfg := newConfig(srv)
	cfg.Gateway.Auth = config.NewAuth()
	sum := sha256.Sum256([]byte("key-of-alice"))
	cfg.Gateway.Auth.APIKeys = []config.APIKey{{Name: "alice", SHA256: hex.EncodeToString(sum[:])}}
	g, logs := startReloading(t, cfg, ReloadOptions{})
	if len(logs.lines("sealing with a random key")) != 1 {
		t.Errorf("no warning that the key is random:\n%s", logs)
	}

	call := func(state string) (int, rpc) {
		t.Helper()
		return mrtrStateCall(t, g, "alice", state)
	}
	// sealed returns a fresh state sealed by the ring's primary key.
	sealed := func() string {
		t.Helper()
		status, m := call("")
		var res struct {
			ResultType   string          `json:"resultType"`
			RequestState json.RawMessage `json:"requestState"`
		}
		if err := json.Unmarshal(m.Result, &res); status != http.StatusOK || err != nil || res.ResultType != "input_required" {
			t.Fatalf("first call: %d %+v", status, m)
		}
		return string(res.RequestState)
	}
	opens := func(what, state string) {
		t.Helper()
		if status, m := call(state); status != http.StatusOK || m.Error != nil || toolText(t, m) != "state srv:x1" {
			t.Errorf("%s: %d %+v, want the server's own state back", what, status, m)
		}
	}
	// forged is the answer to a state altered inside its sealed bytes.
	forged := func(state string) string {
		t.Helper()
		var text string
		if err := json.Unmarshal([]byte(state), &text); err != nil {
			t.Fatalf("state %s: %v", state, err)
		}
		raw, err := base64.RawURLEncoding.DecodeString(text)
		if err != nil {
			t.Fatalf("state %s is not base64url: %v", state, err)
		}
		raw[len(raw)-5] ^= 1 // a bit of the tag
		alt, _ := json.Marshal(base64.RawURLEncoding.EncodeToString(raw))
		status, m := call(string(alt))
		if status != http.StatusBadRequest || m.Error == nil {
			t.Fatalf("a forged state: %d %+v, want 400", status, m)
		}
		return m.Error.Message
	}
	refused := func(what, state, forgedAnswer string) {
		t.Helper()
		status, m := call(state)
		if status != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32602 || m.Error.Message != forgedAnswer {
			t.Errorf("%s: %d %+v, want 400 -32602 %q as a forged state gets", what, status, m, forgedAnswer)
		}
	}

	byRandom := sealed()
	cfg = reloadSealKeys(t, g, cfg) // no keys still: the random key stays
	opens("sealed by the random key, after a reload with no keys", byRandom)
	if len(logs.lines("sealing with a random key")) != 1 {
		t.Errorf("a reload that keeps the random key warned again:\n%s", logs)
	}

	cfg = reloadSealKeys(t, g, cfg, sealKey("k1", 1, true))
	refused("sealed by the random key, after keys are configured", byRandom, forged(byRandom))
	byK1 := sealed()
	opens("sealed by k1", byK1)

	cfg = reloadSealKeys(t, g, cfg, sealKey("k1", 1, true), sealKey("k2", 2, false)) // add
	opens("sealed by k1, k2 added", byK1)
	cfg = reloadSealKeys(t, g, cfg, sealKey("k1", 1, false), sealKey("k2", 2, true)) // promote
	opens("sealed by k1, k2 promoted", byK1)
	byK2 := sealed()
	opens("sealed by k2", byK2)
	reloadSealKeys(t, g, cfg, sealKey("k2", 2, true)) // retire k1
	refused("sealed by k1, retired", byK1, forged(byK2))
	opens("sealed by k2 (the primary: k1 is gone), k1 retired", byK2)
	if len(logs.lines("seal keys changed")) != 4 || len(logs.lines("restart to apply")) != 0 {
		t.Errorf("want 4 \"seal keys changed\" lines and no key to restart for:\n%s", logs)
	}
}

// A request parked for input (a session-era server asked the client
// something) keeps its requestState through a rotation that keeps its
// key, and once its key is retired the state gets the answer a forged
// one gets.
func TestReloadRotationKeepsParkedStates(t *testing.T) {
	cfg := newConfig(fakeServer("s", testkit.FakeOptions{}))
	cfg.Gateway.SealKeys = []config.SealKey{sealKey("k1", 1, true)}
	g, _ := startReloading(t, cfg, ReloadOptions{})
	// ask parks a sampling request and returns the retry's extra params.
	ask := func(prompt string, alter bool) string {
		t.Helper()
		status, m := modernCall(t, g, "s", `"ask"`, "sample", map[string]string{"prompt": prompt}, "")
		var res struct {
			InputRequests map[string]json.RawMessage
			RequestState  string
		}
		if err := json.Unmarshal(m["result"], &res); err != nil || status != http.StatusOK || len(res.InputRequests) != 1 {
			t.Fatalf("asking %q: %d %s %s", prompt, status, m["result"], m["error"])
		}
		if alter {
			raw, _ := base64.RawURLEncoding.DecodeString(res.RequestState)
			raw[len(raw)-5] ^= 1 // a bit of the tag
			res.RequestState = base64.RawURLEncoding.EncodeToString(raw)
		}
		var key string
		for k := range res.InputRequests {
			key = k
		}
		state, _ := json.Marshal(res.RequestState)
		return `,"inputResponses":{"` + key + `":{"role":"assistant","content":{"type":"text","text":"an answer"},"model":"m"}},"requestState":` + string(state)
	}
	retry := func(prompt, extra string) (int, map[string]json.RawMessage) {
		t.Helper()
		return modernCall(t, g, "s", `"retry"`, "sample", map[string]string{"prompt": prompt}, extra)
	}

	kept, retired := ask("kept", false), ask("retired", false)                       // sealed by k1
	cfg = reloadSealKeys(t, g, cfg, sealKey("k1", 1, false), sealKey("k2", 2, true)) // add and promote k2
	if status, m := retry("kept", kept); status != http.StatusOK || !strings.Contains(string(m["result"]), "an answer") {
		t.Fatalf("retry sealed by k1, k2 promoted: %d %s %s", status, m["result"], m["error"])
	}
	reloadSealKeys(t, g, cfg, sealKey("k2", 2, true)) // retire k1
	fstatus, forged := retry("forged", ask("forged", true))
	status, m := retry("retired", retired)
	if fstatus != http.StatusBadRequest || status != fstatus || string(m["error"]) != string(forged["error"]) {
		t.Fatalf("retry sealed by k1, retired: %d %s; a forged state: %d %s; want the same 400", status, m["error"], fstatus, forged["error"])
	}
}

// reloadSealKeys reloads g with a copy of cfg whose seal keys are keys,
// and returns that copy.
func reloadSealKeys(t *testing.T, g *testGateway, cfg *config.Config, keys ...config.SealKey) *config.Config {
	t.Helper()
	next := cloneConfig(cfg)
	next.Gateway.SealKeys = keys
	if err := g.gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	return next
}
