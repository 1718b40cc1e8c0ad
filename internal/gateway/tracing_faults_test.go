package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestTracingFaultsHostileMeta: with tracing on, a request whose trace
// context is malformed (in _meta or in the header), whose _meta is huge,
// not an object, or has duplicate or escaped keys, is still answered, with
// its id byte for byte; the server always gets valid JSON.
func TestTracingFaultsHostileMeta(t *testing.T) {
	exp := withSpans(t)
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.connect(t)

	huge := `{"x":"` + strings.Repeat("a", 1<<20) + `","traceparent":"` + clientTP + `"}`
	cases := []struct {
		name, id, meta, header string
		parseError             bool // refused as a whole: the parser takes no duplicate names
	}{
		{"bad traceparent", `1`, `{"traceparent":"zz-nope","tracestate":"\u0000bad"}`, "", false},
		{"traceparent not a string", `2`, `{"traceparent":42,"tracestate":["x"]}`, "", false},
		{"bad header", `3`, ``, "00-00000000000000000000000000000000-0000000000000000-01", false},
		{"garbage header", `"h"`, ``, strings.Repeat("-", 5000), false},
		{"meta a number", `4`, `5`, "", false},
		{"meta an array", `5`, `[1,2]`, "", false},
		{"meta a string", `6`, `"traceparent"`, "", false},
		{"meta null", `7`, `null`, "", false},
		{"duplicate keys", `8`, `{"traceparent":"` + clientTP + `","traceparent":"x"}`, "", true},
		{"escaped duplicate keys", `9`, `{"traceparent":"` + clientTP + `","trace\u0070arent":"x"}`, "", true},
		{"escaped key", `10`, `{"trace\u0070arent":"` + clientTP + `","x\"y":1}`, "", false},
		{"huge", `11`, huge, "", false},
		{"string id with escapes", `"a\"\\\u00e9\ud83d\ude00\/ b"`, `{"traceparent":"` + clientTP + `"}`, "", false},
		{"big number id", `123456789012345678901234567890`, `{"traceparent":"` + clientTP + `"}`, "", false},
		{"exponent id", `1.5e3`, ``, "", false},
		{"negative zero id", `-0`, `{}`, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := callBody(tc.id, "meta", map[string]any{}, tc.meta)
			req := c.request(http.MethodPost, body)
			if tc.header != "" {
				req.Header.Set("Traceparent", tc.header)
				req.Header.Set("Tracestate", tc.header)
			}
			r := c.do(t, req, nil)
			if tc.parseError {
				// Not tracing's doing: the parser refuses duplicate names
				// anywhere (no parser differential with the server).
				if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "-32700") {
					t.Errorf("duplicate names: status %d %.200s, want 400 parse error", r.Status, r.Body)
				}
				return
			}
			if r.Status != http.StatusOK || len(r.Msgs) == 0 {
				t.Fatalf("status %d, body %.200s", r.Status, r.Body)
			}
			m := r.final(t)
			if !bytes.Equal(m.ID, []byte(tc.id)) {
				t.Errorf("reply id %s, want %s byte for byte", m.ID, tc.id)
			}
			if m.Error != nil {
				t.Logf("error reply: %d %s", m.Error.Code, m.Error.Message)
				return
			}
			got := toolText(t, m)
			if !json.Valid([]byte(got)) && got != "" {
				t.Errorf("server got _meta %.200q: not JSON", got)
			}
		})
	}
	if n := len(exp.GetSpans()); n < len(cases)-2 {
		t.Errorf("%d spans for %d requests", n, len(cases))
	}

	// A batch of the same (2025-03-26 has batches), still one reply per
	// request.
	b := g.client("fake")
	b.version = "2025-03-26"
	b.connect(t)
	var parts []string
	for i, tc := range cases {
		if tc.parseError || tc.header != "" {
			continue
		}
		parts = append(parts, callBody(fmt.Sprint(100+i), "meta", map[string]any{}, tc.meta))
	}
	r := b.post(t, "["+strings.Join(parts, ",")+"]")
	if len(r.Msgs) != len(parts) {
		t.Errorf("batch of %d: %d replies (status %d %.200s)", len(parts), len(r.Msgs), r.Status, r.Body)
	}
}
