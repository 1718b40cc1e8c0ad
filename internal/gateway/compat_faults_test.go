package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A request without an id is dropped however it is written: pretty-printed
// with "method" after "params", or carrying a 1 MiB argument. The server
// never gets it, and the session goes on (a call after it is answered).
func TestFaultRequestsWithoutIDPrettyAndHuge(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("a", testkit.FakeOptions{})))
	c := g.client("a")
	c.connect(t)
	pretty := "{\n  \"jsonrpc\" : \"2.0\",\n  \"params\" : {\n    \"name\" : \"echo\",\n    \"arguments\" : { \"message\" : \"x\" }\n  },\n  \"method\" : \"tools/call\"\n}\n"
	huge := `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"message":"` + strings.Repeat("x", 1<<20) + `"}}}`
	for what, body := range map[string]string{"pretty-printed": pretty, "1 MiB": huge} {
		if r := c.post(t, body); r.Status != http.StatusAccepted {
			t.Errorf("%s request without an id: %d %s", what, r.Status, r.Body)
		}
	}
	echoOK(t, c, "after")
	var got []string
	if err := json.Unmarshal([]byte(toolText(t, c.post(t, callBody("99", "notified", nil, "")).final(t))), &got); err != nil {
		t.Fatal(err)
	}
	for _, m := range got {
		if !strings.HasPrefix(m, "notifications/") {
			t.Errorf("the server got %q without an id (all: %q)", m, got)
		}
	}
	if n := g.gw.Handler.CompatCounts().RequestsWithoutID["streamable"]; n != 2 {
		t.Errorf("dropped counted %d, want 2", n)
	}
}
