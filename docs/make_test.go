package docs

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// makeRE matches a make command line and captures its arguments.
var makeRE = regexp.MustCompile(`^make((?:\s+\S+)*)\s*$`)

// TestMakeTargetsExist: every `make TARGET` a doc shows, in code or in a
// shell block, is a target of the Makefile (variables such as FUZZTIME=1m
// are not targets, nor is a placeholder in capitals).
func TestMakeTargetsExist(t *testing.T) {
	data, err := os.ReadFile(fromRoot("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_-]+):`).FindAllStringSubmatch(string(data), -1) {
		targets[m[1]] = true
	}
	checked := 0
	check := func(where, line string) {
		line, _, _ = strings.Cut(line, "#") // a shell comment
		m := makeRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			return
		}
		for _, arg := range strings.Fields(m[1]) {
			if strings.HasPrefix(arg, "-") || strings.Contains(arg, "=") || strings.ToUpper(arg) == arg {
				continue
			}
			checked++
			if !targets[arg] {
				t.Errorf("%s: `make %s`: the Makefile has no target %q", where, arg, arg)
			}
		}
	}
	for _, f := range docFiles(t) {
		for _, s := range f.Spans {
			check(f.path+":"+strconv.Itoa(s.Line), s.Text)
		}
		for _, b := range f.Blocks {
			if b.Lang() != "sh" {
				continue
			}
			for i, line := range strings.Split(b.Body, "\n") {
				check(f.path+":"+strconv.Itoa(b.Line+1+i), line)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no make command found: the scanner is broken")
	}
}
