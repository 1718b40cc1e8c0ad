package admission

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/limits"
)

// Chain runs its stages in the order given, the handler last, and a
// stage that answers stops the chain.
func TestChainOrder(t *testing.T) {
	var got []string
	stage := func(name string, answer bool) Stage {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = append(got, name)
				if answer {
					w.WriteHeader(http.StatusTeapot)
					return
				}
				next.ServeHTTP(w, r)
			})
		}
	}
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got = append(got, "serve") })
	Chain(stage("a", false), stage("b", false), stage("c", false))(h).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if strings.Join(got, ",") != "a,b,c,serve" {
		t.Errorf("ran %v", got)
	}
	got = nil
	w := httptest.NewRecorder()
	Chain(stage("a", false), stage("b", true), stage("c", false))(h).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if strings.Join(got, ",") != "a,b" || w.Code != http.StatusTeapot {
		t.Errorf("ran %v, status %d; want a,b and b's answer", got, w.Code)
	}
}

type otherKey struct{}

// The context With returns carries the Request the stages fill in, and
// everything its parent carries.
func TestWithFrom(t *testing.T) {
	parent := context.WithValue(context.Background(), otherKey{}, "kept")
	ctx, req := With(parent, Request{Key: "endpoints/all", Kind: "endpoint", Name: "all"})
	if From(ctx) != req || req.Name != "all" {
		t.Fatalf("From = %p, With gave %p", From(ctx), req)
	}
	if ctx.Value(otherKey{}) != "kept" {
		t.Error("the parent's values are lost")
	}
	if From(parent) != nil {
		t.Error("a Request outside a chain")
	}
	ctx = conn.WithPrincipal(ctx, &auth.Principal{Kind: "apikey", Name: "alice"})
	if From(ctx) != req {
		t.Error("a context derived from it lost the Request")
	}
}

// Limit hands the transport the limits under the principal's key; without
// limits the transport's questions are answered yes, holding nothing.
func TestLimitStage(t *testing.T) {
	msgs := []jsonrpc.Message{{Kind: jsonrpc.KindRequest}}
	var none *Request
	if release, ref := none.AdmitRequest(msgs); ref != nil || release == nil {
		t.Fatalf("no Request: %v", ref)
	}
	l := limits.New(&limits.Config{MaxInFlight: 1})
	var first, second *limits.Refusal
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := From(r.Context())
		if !req.Limited() {
			t.Fatal("the Request has no limits")
		}
		var release func()
		release, first = req.AdmitRequest(msgs)
		_, second = req.AdmitRequest(msgs) // the same principal: over its one in flight
		if release != nil {
			release()
		}
	})
	h := Chain(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, _ := With(r.Context(), Request{Key: "x", Kind: "server", Name: "x"})
			ctx = conn.WithPrincipal(ctx, &auth.Principal{Kind: "apikey", Name: "alice"})
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}, Limit(l))(serve)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil))
	if first != nil || second == nil || !strings.Contains(second.Msg, "in flight") {
		t.Errorf("first %v, second %v; want the second refused for the principal's in-flight limit", first, second)
	}
}

// The Audit stage answers on an Exchange that lives in the request's
// context (WithExchange's one allocation), and writes the POST's line as
// one of its own would; a Request made without it gets an Exchange of its
// own.
func TestAuditExchangeInContext(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	a := audit.New(lockedWriter{&mu, &buf}, false)
	var inContext, own bool
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x, ok := w.(*audit.Exchange)
		if !ok {
			t.Fatal("not answered on an Exchange")
		}
		req := From(r.Context())
		inContext, own = x == req.exchange, req.exchange == nil
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	})
	resolve := func(with bool) Stage {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				req := Request{Key: "x", Kind: "server", Name: "x"}
				if with {
					ctx, _ := WithExchange(r.Context(), req)
					r = r.WithContext(ctx)
				} else {
					r = r.WithContext(context.WithValue(r.Context(), requestKey{}, &req))
				}
				next.ServeHTTP(w, r)
			})
		}
	}
	all := func(*http.Request) bool { return true }
	Chain(resolve(true), Audit(a, all))(serve).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader("{}")))
	if !inContext {
		t.Error("the Exchange is not the one in the request's context")
	}
	Chain(resolve(false), Audit(a, all))(serve).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader("{}")))
	if !own {
		t.Error("a Request made without WithExchange has room for an Exchange")
	}
	a.Close()
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(buf.String(), `"target":"x"`); n != 2 {
		t.Errorf("%d lines for 2 audited POSTs:\n%s", n, buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestWithExchangeFrom: WithExchange's context is With's, with room.
func TestWithExchangeFrom(t *testing.T) {
	ctx, req := WithExchange(context.Background(), Request{Key: "x", Kind: "server", Name: "x"})
	if From(ctx) != req || req.exchange == nil {
		t.Fatalf("From = %p, WithExchange gave %p (room %p)", From(ctx), req, req.exchange)
	}
	if _, req := With(context.Background(), Request{}); req.exchange != nil {
		t.Error("With made room for an Exchange")
	}
}
