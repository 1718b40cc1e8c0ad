package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit/markdown"
)

// invocationRE matches a command line that runs mcpgate (the binary, or
// `go run ./cmd/mcpgate`) and captures its arguments.
var invocationRE = regexp.MustCompile(`^(?:go run \./cmd/mcpgate|(?:\S*/)?mcpgate)((?:\s+\S+)+)\s*$`)

// jsonArgsRE matches a client's config entry that runs mcpgate, and
// captures its "args" array.
var jsonArgsRE = regexp.MustCompile(`"command":\s*"mcpgate",\s*"args":\s*(\[[^\]]*\])`)

// helpFlagRE matches a flag's line in `mcpgate COMMAND --help`.
var helpFlagRE = regexp.MustCompile(`(?m)^  --([a-z0-9-]+)`)

// flagTokenRE matches an argument that is a flag, its first '-' removed.
var flagTokenRE = regexp.MustCompile(`^-?[a-z][a-z0-9-]*(=.*)?$`)

// shellSepRE splits a shell line into its commands.
var shellSepRE = regexp.MustCompile(`&&|\|\||;|\|`)

// TestDocsShowRealFlags: every mcpgate command line that README.md and
// docs/*.md show (`mcpgate serve --config FILE [--watch=false]`, a shell
// line, a client's "command": "mcpgate" entry) names a command that exists
// and only flags that command has, as its --help lists them. Arguments
// after "--" belong to the server it runs.
func TestDocsShowRealFlags(t *testing.T) {
	paths, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(paths) == 0 {
		t.Fatalf("docs: %q, %v", paths, err)
	}
	flagsOf := map[string]map[string]bool{} // by command; nil: no such command
	commandFlags := func(name string) map[string]bool {
		flags, ok := flagsOf[name]
		if !ok {
			if r := runCLI(name, "--help"); r.code == exitOK {
				flags = map[string]bool{"help": true, "h": true}
				for _, m := range helpFlagRE.FindAllStringSubmatch(r.stdout, -1) {
					flags[m[1]] = true
				}
			}
			flagsOf[name] = flags
		}
		return flags
	}
	checked := 0
	check := func(where string, args []string) {
		if len(args) == 0 {
			return
		}
		if placeholder(args[0]) { // `mcpgate COMMAND --help`
			return
		}
		flags := commandFlags(args[0])
		if flags == nil {
			t.Errorf("%s: `mcpgate %s`: no such command", where, args[0])
			return
		}
		for _, arg := range args[1:] {
			arg = strings.Trim(arg, "[](),.")
			if arg == "--" {
				break
			}
			name, ok := strings.CutPrefix(arg, "-")
			if !ok || !flagTokenRE.MatchString(name) {
				continue
			}
			name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
			checked++
			if !flags[name] {
				t.Errorf("%s: `mcpgate %s --%s`: %s has no flag --%s", where, args[0], name, args[0], name)
			}
		}
	}
	line := func(where, text string) {
		if m := invocationRE.FindStringSubmatch(strings.TrimSpace(text)); m != nil {
			check(where, strings.Fields(m[1]))
		}
		for _, m := range jsonArgsRE.FindAllStringSubmatch(text, -1) {
			var args []string
			if err := json.Unmarshal([]byte(m[1]), &args); err != nil {
				t.Errorf("%s: args %s: %v", where, m[1], err)
				continue
			}
			check(where, args)
		}
	}
	for _, path := range append([]string{"../../README.md"}, paths...) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		doc := markdown.Parse(string(data))
		name := strings.TrimPrefix(path, "../../")
		for _, s := range doc.Spans {
			line(name+":"+strconv.Itoa(s.Line), s.Text)
		}
		for _, b := range doc.Blocks {
			body := strings.ReplaceAll(b.Body, "\\\n", " ") // continuation lines
			for i, l := range strings.Split(body, "\n") {
				where := name + ":" + strconv.Itoa(b.Line+1+i)
				switch b.Lang() {
				case "json":
					line(where, l)
					continue
				case "sh", "bash", "console":
				default: // text, such as a package listing
					continue
				}
				for _, cmd := range shellSepRE.Split(l, -1) {
					line(where, strings.TrimPrefix(strings.TrimSpace(cmd), "$ "))
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no mcpgate flag found in the docs: the scanner is broken")
	}
}

// placeholder reports whether a doc's argument stands for one the reader
// chooses (FILE, COMMAND), written in capitals.
func placeholder(arg string) bool {
	return arg != "" && strings.ToUpper(arg) == arg && strings.ToLower(arg) != arg
}
