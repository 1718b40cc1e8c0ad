package config

import (
	"path"
	"strings"
	"testing"
	"time"
)

// A server's "timeout": a string is a duration; a number is whole seconds
// up to 3600 (Cline, Roo), milliseconds above (Cursor, Windsurf).
func TestServerTimeout(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want time.Duration
		err  string
	}{
		{`"90s"`, 90 * time.Second, ""},
		{`"500ms"`, 500 * time.Millisecond, ""},
		{`60`, time.Minute, ""},
		{`3600`, time.Hour, ""},
		{`3601`, 3601 * time.Millisecond, ""},
		{`60000`, time.Minute, ""},
		{`600000`, 10 * time.Minute, ""},
		{`60000.0`, time.Minute, ""},
		{`1e5`, 100 * time.Second, ""},
		{`0`, 0, "a number is whole seconds up to 3600, else milliseconds"},
		{`-5`, 0, "not -5"},
		{`1.5`, 0, "not 1.5"},
		{`1e300`, 0, "not 1e300"},
		{`"60000"`, 0, `"60000" is not a duration (use e.g. "60000s")`},
		{`true`, 0, "must be a duration string"},
	} {
		cfg, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x", "timeout": `+c.raw+`}}}`), nil)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), "mcpServers.a.timeout: ") || !strings.Contains(err.Error(), c.err) {
				t.Errorf("timeout %s: err %v, want %q", c.raw, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("timeout %s: %v", c.raw, err)
			continue
		}
		if got := cfg.Servers["a"].Timeout; got != c.want {
			t.Errorf("timeout %s = %v, want %v", c.raw, got, c.want)
		}
	}
}

// A disabled tool is denied by its exact name, even one with glob
// characters, and only that one.
func TestDisabledToolsAreExactNames(t *testing.T) {
	for _, name := range []string{"git_reset", "a*b", "q?", "[x]", `back\slash`} {
		pat := literalPattern(name)
		if ok, err := path.Match(pat, name); !ok || err != nil {
			t.Errorf("%q: pattern %q does not match it (%v)", name, pat, err)
		}
		for _, other := range []string{name + "x", "ab", "q1", "x"} {
			if ok, _ := path.Match(pat, other); ok && other != name {
				t.Errorf("%q: pattern %q matches %q too", name, pat, other)
			}
		}
	}
	cfg, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x", "tools": {"deny": ["rm_*"]}, "disabledTools": ["git_*"]}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["a"].Tools.Deny; len(got) != 2 || got[0] != "rm_*" || got[1] != `git_\*` {
		t.Errorf("deny %q, want the file's patterns then the disabled tools", got)
	}
}
