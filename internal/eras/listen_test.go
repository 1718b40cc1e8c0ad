package eras

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestFilter(t *testing.T) {
	parse := func(s string) Filter {
		var f Filter
		if err := json.Unmarshal([]byte(s), &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tt := range []struct {
		f, g      string
		covers    bool
		intersect string
	}{
		{`{}`, `{}`, true, `{}`},
		{`{"toolsListChanged":true}`, `{}`, true, `{}`},
		{`{}`, `{"toolsListChanged":true}`, false, `{}`},
		{`{"toolsListChanged":true,"promptsListChanged":true}`, `{"promptsListChanged":true}`, true, `{"promptsListChanged":true}`},
		{`{"resourcesListChanged":true}`, `{"resourcesListChanged":true,"toolsListChanged":false}`, true, `{"resourcesListChanged":true}`},
		{`{"resourceSubscriptions":["a","b"]}`, `{"resourceSubscriptions":["b"]}`, true, `{"resourceSubscriptions":["b"]}`},
		{`{"resourceSubscriptions":["a"]}`, `{"resourceSubscriptions":["a","c"]}`, false, `{"resourceSubscriptions":["a"]}`},
	} {
		f, g := parse(tt.f), parse(tt.g)
		if got := f.Covers(g); got != tt.covers {
			t.Errorf("%s covers %s = %v", tt.f, tt.g, got)
		}
		if got, _ := json.Marshal(f.Intersect(g)); string(got) != tt.intersect {
			t.Errorf("%s ∩ %s = %s, want %s", tt.f, tt.g, got, tt.intersect)
		}
	}
	f := parse(`{"toolsListChanged":true,"resourceSubscriptions":["file:///d/","test://x"]}`)
	for _, tt := range []struct {
		method, uri string
		want        bool
	}{
		{"notifications/tools/list_changed", "", true},
		{"notifications/prompts/list_changed", "", false},
		{"notifications/resources/list_changed", "", false},
		{"notifications/resources/updated", "file:///d/", true},
		{"notifications/resources/updated", "file:///d/e/f", true},
		{"notifications/resources/updated", "file:///dx", false},
		{"notifications/resources/updated", "test://x/y", true},
		{"notifications/resources/updated", "test://xy", false},
		{"notifications/message", "", false},
	} {
		if got := f.Wants(tt.method, tt.uri); got != tt.want {
			t.Errorf("wants(%s, %q) = %v", tt.method, tt.uri, got)
		}
	}
	for raw, ok := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{}}}`:                              true,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`:                                                false,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":null}}`:                            false,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":1}}}`:          false,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["a"]}}}`: true,
	} {
		if _, got := RequestedFilter([]byte(raw)); got != ok {
			t.Errorf("requestedFilter(%s) ok = %v", raw, got)
		}
	}
}

func TestSubscriptionSpan(t *testing.T) {
	for _, tt := range []struct{ raw, member, want string }{
		{`{"jsonrpc":"2.0","method":"x","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":12}}}`, "params", "12"},
		{`{"params":{"a":[1,{"b":2}],"_meta":{"k":"v", "io.modelcontextprotocol/subscriptionId" : "L1" }},"method":"x"}`, "params", `"L1"`},
		{`{"id":1,"result":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`, "result", "1"},
		{`{"id":1,"result":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`, "params", ""},
		{`{"params":{"_meta":{"io.modelcontextprotocol/subscriptionId":{"x":1}}}}`, "params", ""},
		{`{"params":{"_meta":{"subscriptionId":1}}}`, "params", ""},
		{`{"params":{"_meta":["io.modelcontextprotocol/subscriptionId"]}}`, "params", ""},
		{`{"params":{"_meta":{"io.modelcontextprotocol\/subscriptionId":3}}}`, "params", "3"},
		{`{"params":{"_meta":{"io.modelcontextprotocol/subscriptionId":`, "params", ""},
	} {
		s, _ := SubscriptionSpan([]byte(tt.raw), tt.member)
		got := ""
		if s.Present() {
			got = tt.raw[s.Start:s.End]
		}
		if got != tt.want {
			t.Errorf("subscriptionSpan(%s, %s) = %q, want %q", tt.raw, tt.member, got, tt.want)
		}
	}
}

// FuzzSubscriptionSpan: any input; a span found is in bounds and holds a
// string or a number.
func FuzzSubscriptionSpan(f *testing.F) {
	f.Add([]byte(`{"params":{"_meta":{"io.modelcontextprotocol/subscriptionId":12}}}`))
	f.Add([]byte(`{"params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"x\"y"}}}`))
	f.Add([]byte(`{"params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1e5}},"params":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, _ := SubscriptionSpan(raw, "params")
		if !s.Present() {
			return
		}
		if s.Start < 0 || s.End > len(raw) || s.Start >= s.End {
			t.Fatalf("span %v out of range for %d bytes", s, len(raw))
		}
		if c := raw[s.Start]; c != '"' && c != '-' && (c < '0' || c > '9') {
			t.Fatalf("span %q is not a string or a number", raw[s.Start:s.End])
		}
	})
}

// recStream records what a Listener passes on.
type recStream struct{ got []string }

func (r *recStream) Send(msg []byte)  { r.got = append(r.got, "send "+string(msg)) }
func (r *recStream) Reply(msg []byte) { r.got = append(r.got, "reply "+string(msg)) }

// TestListener: nothing reaches the client before the acknowledgement,
// the acknowledgement goes once and first, and nothing follows the end,
// whose reply goes once.
func TestListener(t *testing.T) {
	out := &recStream{}
	l := &Listener{Out: out}
	l.Send([]byte("early"))       // before the ack: dropped
	l.Deliver([]byte("ack"), nil) // the ack alone
	l.Deliver([]byte("ack"), []byte("n1"))
	l.Send([]byte("n2"))
	l.End(nil, []byte("last"), []byte("final"))
	l.Send([]byte("late"))
	l.Reply([]byte("again"))
	want := "send ack|send n1|send n2|send last|reply final"
	if got := strings.Join(out.got, "|"); got != want {
		t.Errorf("got %s, want %s", got, want)
	}

	out = &recStream{}
	l = &Listener{Out: out}
	l.End([]byte("ack"), []byte("cancelled"), nil) // ended before it was acknowledged
	if got := strings.Join(out.got, "|"); got != "send ack|send cancelled|reply " {
		t.Errorf("end before the ack: got %s", got)
	}

	out = &recStream{}
	l = &Listener{Out: out}
	l.Deliver([]byte("ack"), nil)
	l.Stop() // its client left
	l.Deliver(nil, []byte("n"))
	l.End(nil, []byte("last"), nil)
	if got := strings.Join(out.got, "|"); got != "send ack|reply " {
		t.Errorf("after Stop: got %s", got)
	}
}
