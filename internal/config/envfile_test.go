package config

import (
	"maps"
	"strings"
	"testing"
)

func TestParseEnvFile(t *testing.T) {
	got, err := ParseEnvFile("# comment\n\nA=1\nexport B = two words \r\nC=\"q \\\"x\\\"\\n\" # c\nD='$HOME \\n'\nE=v # trailing\nF=\nG=a#b\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "1", "B": "two words", "C": "q \"x\"\n", "D": `$HOME \n`, "E": "v", "F": "", "G": "a#b"}
	if !maps.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	for _, c := range []struct{ in, err string }{
		{"A=1\nnot a line\n", "line 2: not KEY=VALUE"},
		{"1A=x", "line 1: not KEY=VALUE"},
		{`A="open`, "line 1: A: unterminated double quote"},
		{`A='open`, "line 1: A: unterminated single quote"},
	} {
		if _, err := ParseEnvFile(c.in); err == nil || err.Error() != c.err {
			t.Errorf("%q: err %v, want %q", c.in, err, c.err)
		}
	}
}

// FuzzParseEnvFile: any text gives variables with valid names, or an
// error naming a line; never a panic.
func FuzzParseEnvFile(f *testing.F) {
	f.Add("A=1\nexport B='x'\n# c\nC=\"a\\nb\" # d\n")
	f.Add("=\n\"\n'")
	f.Fuzz(func(t *testing.T, text string) {
		vars, err := ParseEnvFile(text)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("error %q names no line", err)
			}
			return
		}
		for k := range vars {
			if !validVarName(k) {
				t.Fatalf("invalid name %q", k)
			}
		}
	})
}
