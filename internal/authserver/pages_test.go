package authserver

import (
	"strings"
	"testing"
)

// TestPagesHaveNoExternalAssets: no page refers to anything outside
// itself (no src, no stylesheet link, no URL in the CSS), and only the
// passkey script is inline.
func TestPagesHaveNoExternalAssets(t *testing.T) {
	entries, err := pageFiles.ReadDir("pages")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := pageFiles.ReadFile("pages/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, bad := range []string{"src=", "<link", "url(", "@import", "style=\"", "onclick", "onload"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s contains %q", e.Name(), bad)
			}
		}
	}
}

func TestCSPSource(t *testing.T) {
	for in, want := range map[string]string{
		"https://claude.ai/api/mcp/auth_callback": "https://claude.ai",
		"http://127.0.0.1:4567/cb":                "http://127.0.0.1:4567",
		"com.example.app:/oauth":                  "com.example.app:",
		"cursor://anysphere.cursor-retrieval/cb":  "cursor:",
		"https://a.example;script-src *":          "",
		"javascript alert(1)":                     "",
		"":                                        "",
	} {
		if got := cspSource(in); got != want {
			t.Errorf("cspSource(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCSPSource: whatever redirect URI a client registered, what it adds
// to the consent page's CSP is one source expression: it cannot end the
// directive or add another.
func FuzzCSPSource(f *testing.F) {
	f.Add("https://claude.ai/api/mcp/auth_callback")
	f.Add("http://[::1]:9/cb")
	f.Add("x-y.z+w:/p")
	f.Add("https://a.example;script-src *")
	f.Fuzz(func(t *testing.T, uri string) {
		s := cspSource(uri)
		if strings.ContainsAny(s, " ;,'\"\t\r\n") {
			t.Fatalf("cspSource(%q) = %q", uri, s)
		}
	})
}
