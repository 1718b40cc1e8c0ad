package docs

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit/markdown"
)

// everyVar resolves every ${VAR} a doc shows, as a deployment would.
func everyVar(name string) (string, bool) {
	return "docs-" + strings.ToLower(name) + "-0123456789abcdef", true
}

// TestConfigBlocksParse: every ```json block of README.md and docs/*.md is a
// config the gateway's own loader accepts, as a reader would paste it. A
// block that cannot stand alone (it names a file only a deployed host has,
// or the members of an object) is marked ```json fragment: it must still be
// JSON (braces added around bare members) whose every key exists.
func TestConfigBlocksParse(t *testing.T) {
	checked := 0
	for _, f := range docFiles(t) {
		for _, b := range f.Blocks {
			if b.Lang() != "json" {
				continue
			}
			checked++
			where := f.path + ":" + strconv.Itoa(b.Line)
			switch b.Info {
			case "json":
				if _, err := config.ParseWith([]byte(b.Body), config.Options{LookupEnv: everyVar}); err != nil {
					t.Errorf("%s: the config does not load:\n%v", where, err)
				}
			case "json fragment":
				checkFragment(t, where, b.Body)
			default:
				t.Errorf("%s: info string %q: want json or json fragment", where, b.Info)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no json block found: the scanner is broken")
	}
}

// checkFragment checks a ```json fragment block: JSON, and no key the
// loader does not know.
func checkFragment(t *testing.T, where, body string) {
	t.Helper()
	text := strings.TrimSpace(body)
	if strings.HasPrefix(text, `"`) {
		text = "{" + text + "}"
	}
	if !json.Valid([]byte(text)) {
		t.Errorf("%s: the fragment is not JSON:\n%s", where, text)
		return
	}
	_, err := config.ParseWith([]byte(text), config.Options{LookupEnv: everyVar})
	for _, p := range problems(t, where, err) {
		if p.Msg == "unknown key" || p.Msg == "duplicate key" {
			t.Errorf("%s: %v", where, p)
		}
	}
}

// problems returns the config problems of err (none for nil).
func problems(t *testing.T, where string, err error) config.Problems {
	t.Helper()
	if err == nil {
		return nil
	}
	var ps config.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("%s: error %v is not config.Problems", where, err)
	}
	return ps
}

// keyTable is a reference table whose first header cell is "key of `PATH`".
type keyTable struct {
	where string   // file:line of its header
	path  string   // "gateway", "mcpServers.NAME", ...
	keys  []string // the keys of its first column, in order ("oauth.issuers" stays dotted)
	// defaults holds each key's second cell, its default as the doc gives it.
	defaults map[string]string
}

var keyOfRE = regexp.MustCompile("^key of `([A-Za-z.]+)`$")

// keyTables returns every key table of the docs.
func keyTables(t *testing.T) []keyTable {
	t.Helper()
	var tables []keyTable
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(fromRoot(f.path))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			m := keyOfRE.FindStringSubmatch(cell(lines[i], 0))
			if m == nil {
				continue
			}
			kt := keyTable{where: f.path + ":" + strconv.Itoa(i+1), path: m[1], defaults: map[string]string{}}
			for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
				first := cell(lines[i], 0)
				spans := markdown.Parse(first).Spans
				if len(spans) == 0 {
					t.Errorf("%s:%d: key cell %q names no `key`", f.path, i+1, first)
				}
				for _, s := range spans {
					kt.keys = append(kt.keys, s.Text)
					kt.defaults[s.Text] = cell(lines[i], 1)
				}
			}
			tables = append(tables, kt)
		}
	}
	return tables
}

// keyRE matches a key, dotted when it names one inside another.
var keyRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$`)

// cell returns the n-th cell of a table row, trimmed ("" if none). A "\|"
// inside a cell, as in `text\|json`, separates nothing.
func cell(row string, n int) string {
	if !strings.HasPrefix(row, "|") {
		return ""
	}
	start := 1
	for i := 1; i < len(row); i++ {
		if row[i] == '\\' {
			i++
			continue
		}
		if row[i] != '|' {
			continue
		}
		if n == 0 {
			return strings.TrimSpace(row[start:i])
		}
		n--
		start = i + 1
	}
	return ""
}

// TestKeyTablesNameRealKeys: each key a "key of `PATH`" table lists is a key
// the loader knows at PATH: set to a value of any type, it may be refused
// for its value but never as an unknown key. A made-up key next to it is
// refused as unknown, so the probe reaches the object the table is about.
func TestKeyTablesNameRealKeys(t *testing.T) {
	tables := keyTables(t)
	if len(tables) < 5 {
		t.Fatalf("found %d key tables, want those of mcpServers.NAME, gateway, gateway.endpoints.NAME, gateway.auth, gateway.admin", len(tables))
	}
	for _, kt := range tables {
		if unknown := unknownKeys(t, kt.path, "zzNotAKey"); !unknown {
			t.Errorf("%s: a made-up key under %s is not refused: the probe does not reach it", kt.where, kt.path)
		}
		for _, key := range kt.keys {
			if !keyRE.MatchString(key) {
				t.Errorf("%s: `%s` is not a key", kt.where, key)
				continue
			}
			if unknownKeys(t, kt.path, key) {
				t.Errorf("%s: %s.%s is not a key the config loader knows", kt.where, kt.path, key)
			}
		}
	}
}

// unknownKeys reports whether a config setting key under path (NAME read as
// a name) is refused as an unknown key, at key or on the way to it.
func unknownKeys(t *testing.T, path, key string) bool {
	t.Helper()
	segs := strings.Split(strings.ReplaceAll(path, "NAME", "probe")+"."+key, ".")
	var v any = 0
	for i := len(segs) - 1; i >= 0; i-- {
		v = map[string]any{segs[i]: v}
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	_, err = config.ParseWith(data, config.Options{LookupEnv: everyVar})
	full := strings.Join(segs, ".")
	for _, p := range problems(t, string(data), err) {
		if p.Msg == "unknown key" && (p.Path == full || strings.HasPrefix(full, p.Path+".")) {
			return true
		}
	}
	return false
}

// TestKeyTablesCoverExamples: every key the examples use is in its table.
// examples/full.json names every gateway, stdio server and endpoint key (its
// own test, internal/config, says so), so no key goes undocumented.
func TestKeyTablesCoverExamples(t *testing.T) {
	tables := map[string][]string{}
	for _, kt := range keyTables(t) {
		tables[kt.path] = append(tables[kt.path], kt.keys...)
	}
	documented := func(path, key string) bool {
		return slices.ContainsFunc(tables[path], func(k string) bool { return k == key || strings.HasPrefix(k, key+".") })
	}
	files := []string{"full", "auth", "endpoints", "remote", "quickstart"}
	for _, name := range files {
		var ex struct {
			Servers map[string]map[string]json.RawMessage `json:"mcpServers"`
			Gateway map[string]json.RawMessage            `json:"gateway"`
		}
		data, err := os.ReadFile(fromRoot("examples/" + name + ".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &ex); err != nil {
			t.Fatalf("examples/%s.json: %v", name, err)
		}
		check := func(path string, obj map[string]json.RawMessage) {
			for key := range obj {
				if !documented(path, key) {
					t.Errorf("examples/%s.json uses %s.%s, which no \"key of `%s`\" table lists", name, path, key, path)
				}
			}
		}
		for _, s := range ex.Servers {
			check("mcpServers.NAME", s)
		}
		check("gateway", ex.Gateway)
		for sub, path := range map[string]string{"auth": "gateway.auth", "admin": "gateway.admin"} {
			var obj map[string]json.RawMessage
			if raw, ok := ex.Gateway[sub]; ok && json.Unmarshal(raw, &obj) == nil {
				check(path, obj)
			}
		}
		var endpoints map[string]json.RawMessage
		if raw, ok := ex.Gateway["endpoints"]; ok && json.Unmarshal(raw, &endpoints) == nil {
			for _, raw := range endpoints {
				var obj map[string]json.RawMessage
				if json.Unmarshal(raw, &obj) == nil { // "all": false is no object
					check("gateway.endpoints.NAME", obj)
				}
			}
		}
	}
}

// literalRE matches a default cell that is one JSON value in code, perhaps
// followed by a gloss: `"30s"`, `0` (unlimited).
var literalRE = regexp.MustCompile("^`([^`]+)`(?: \\(.*\\))?$")

// TestKeyTablesShowDefaults: a default the gateway, server and endpoint
// tables give as a value (`"30s"`, `4096`, `{"domain": ""}`) is the default
// the loader fills in, as examples/full.json spells every one out (its own
// test in internal/config holds it to config.Defaults).
func TestKeyTablesShowDefaults(t *testing.T) {
	var full struct {
		Servers map[string]map[string]json.RawMessage `json:"mcpServers"`
		Gateway map[string]json.RawMessage            `json:"gateway"`
	}
	data, err := os.ReadFile(fromRoot("examples/full.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &full); err != nil {
		t.Fatal(err)
	}
	var endpoints map[string]map[string]json.RawMessage
	if err := json.Unmarshal(full.Gateway["endpoints"], &endpoints); err != nil {
		t.Fatal(err)
	}
	values := map[string]map[string]json.RawMessage{
		"gateway":                full.Gateway,
		"mcpServers.NAME":        full.Servers["memory"],
		"gateway.endpoints.NAME": endpoints["all"],
	}
	// full.json's memory server runs a command, which no default does.
	notDefaults := map[string]bool{"mcpServers.NAME.command": true, "mcpServers.NAME.args": true}
	compared := 0
	for _, kt := range keyTables(t) {
		example, ok := values[kt.path]
		if !ok {
			continue
		}
		for _, key := range kt.keys {
			m := literalRE.FindStringSubmatch(kt.defaults[key])
			raw, inExample := example[key]
			if m == nil || !inExample || notDefaults[kt.path+"."+key] {
				continue
			}
			var doc, ex any
			if json.Unmarshal([]byte(m[1]), &doc) != nil {
				continue // a name, such as `gateway.requestTimeout`
			}
			if err := json.Unmarshal(raw, &ex); err != nil {
				t.Fatal(err)
			}
			compared++
			if !reflect.DeepEqual(doc, ex) {
				t.Errorf("%s: %s.%s: the doc's default is %s, examples/full.json's %s", kt.where, kt.path, key, m[1], raw)
			}
		}
	}
	if compared < 40 {
		t.Errorf("compared %d defaults, want the 40 and more the tables give as values: is the scanner broken?", compared)
	}
}
