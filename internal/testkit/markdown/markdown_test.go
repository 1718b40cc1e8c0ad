package markdown

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	text := "# mcpgate\n" +
		"\n" +
		"Run `make test` and see [the docs](docs/config.md#gateway), a `span\n" +
		"wrapped` across lines, ``a `tick` inside`` and \\`no span`.\n" +
		"\n" +
		"```json fragment\n" +
		"{\"a\": 1}\n" +
		"```\n" +
		"\n" +
		"~~~\n" +
		"```\n" +
		"not [a link](x.md) nor `a span`\n" +
		"~~~\n" +
		"## `mcpServers.NAME`\n" +
		"## Policy: who may use which tools\n" +
		"## Policy: who may use which tools\n" +
		"## See [TLS](#tls) (2026-07-28)\n" +
		"A [link with a title](../README.md \"t\") and one [in code](`#not`).\n"
	got := Parse(text)
	want := Doc{
		Blocks: []Block{
			{Line: 6, Info: "json fragment", Body: "{\"a\": 1}\n"},
			{Line: 10, Info: "", Body: "```\nnot [a link](x.md) nor `a span`\n"},
		},
		Spans: []Span{
			{3, "make test"}, {3, "span wrapped"}, {4, "a `tick` inside"},
			{14, "mcpServers.NAME"}, {18, "#not"},
		},
		Links: []Link{{3, "docs/config.md#gateway"}, {17, "#tls"}, {18, "../README.md"}},
		Anchors: []string{
			"mcpgate", "mcpserversname", "policy-who-may-use-which-tools",
			"policy-who-may-use-which-tools-1", "see-tls-2026-07-28",
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", got, want)
	}
	if lang := got.Blocks[0].Lang(); lang != "json" {
		t.Errorf("Lang = %q, want json", lang)
	}
}

func TestParseUnclosedFence(t *testing.T) {
	got := Parse("text\n```sh\nmake test\n")
	want := []Block{{Line: 2, Info: "sh", Body: "make test\n"}}
	if !reflect.DeepEqual(got.Blocks, want) {
		t.Errorf("Blocks = %+v, want %+v", got.Blocks, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("# a\n\n`x` [l](y.md#z)\n```json\n{}\n```\n")
	f.Add("``` ```\n`` a ` b ``\n\\`c`\n~~~~\n~~~\n")
	f.Fuzz(func(t *testing.T, text string) {
		d := Parse(text)
		lines := strings.Count(text, "\n") + 1
		for _, b := range d.Blocks {
			if b.Line < 1 || b.Line > lines || !strings.Contains(text, strings.TrimSuffix(b.Body, "\n")) {
				t.Fatalf("block %+v is not in the text", b)
			}
		}
		for _, s := range d.Spans {
			if s.Line < 1 || s.Line > lines || strings.Contains(s.Text, "\n") {
				t.Fatalf("span %+v: bad line or a line break", s)
			}
		}
		for _, l := range d.Links {
			if l.Line < 1 || l.Line > lines || !strings.Contains(text, l.Target) {
				t.Fatalf("link %+v is not in the text", l)
			}
		}
		for _, a := range d.Anchors {
			if strings.ContainsAny(a, " \t") || a != strings.ToLower(a) {
				t.Fatalf("anchor %q has spaces or capitals", a)
			}
		}
	})
}
