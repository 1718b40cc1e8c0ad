// Package markdown splits the repository's Markdown documentation into what
// the documentation tests check: fenced code blocks, inline code spans,
// relative links and heading anchors. It reads the subset of CommonMark the
// docs use (ATX headings, backtick and tilde fences, inline links), not
// Markdown in general.
//
// Callers: the tests of package docs (links, config blocks, key tables,
// make targets) and of cmd/mcpgate (the flags a doc shows). It holds no
// state: every function is pure and safe for concurrent use.
//
// Nothing here may be imported by non-test code.
package markdown

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Doc is one Markdown file, split.
type Doc struct {
	Blocks  []Block  // fenced code blocks, in order
	Spans   []Span   // inline code spans outside the blocks, in order
	Links   []Link   // inline links outside code, in order
	Anchors []string // the GitHub anchor of each heading, in order
}

// Block is a fenced code block.
type Block struct {
	Line int    // 1-based line of the opening fence
	Info string // the info string after the fence: "json", "json fragment", "sh", ""
	Body string // the lines between the fences, each ending in "\n"
}

// Lang is the block's language: the first word of its info string.
func (b Block) Lang() string {
	lang, _, _ := strings.Cut(b.Info, " ")
	return lang
}

// Span is an inline code span.
type Span struct {
	Line int    // 1-based line where it starts
	Text string // its content, a line break inside it read as a space
}

// Link is an inline link [text](Target).
type Link struct {
	Line   int
	Target string // as written: "docs/config.md#gateway", "#logs", "https://..."
}

// Parse splits a Markdown document.
func Parse(text string) Doc {
	var d Doc
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	seen := map[string]int{}
	var para []string // prose lines of the paragraph being read
	paraLine := 0
	flush := func() {
		if len(para) > 0 {
			d.inline(paraLine, para)
		}
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if fence, info, ok := openFence(line); ok {
			flush()
			b := Block{Line: i + 1, Info: info}
			var body strings.Builder
			for i++; i < len(lines) && !closesFence(lines[i], fence); i++ {
				body.WriteString(lines[i])
				body.WriteByte('\n')
			}
			b.Body = body.String()
			d.Blocks = append(d.Blocks, b)
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if h, ok := heading(line); ok {
			flush()
			a := Anchor(h)
			if n := seen[a]; n > 0 {
				seen[a] = n + 1
				a = fmt.Sprintf("%s-%d", a, n)
			} else {
				seen[a] = 1
			}
			d.Anchors = append(d.Anchors, a)
			d.inline(i+1, []string{h})
			continue
		}
		if len(para) == 0 {
			paraLine = i + 1
		}
		para = append(para, line)
	}
	flush()
	return d
}

// openFence reports whether line opens a fenced block, and returns the fence
// (its run of backticks or tildes) and the info string.
func openFence(line string) (fence, info string, ok bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return "", "", false
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 {
		return "", "", false
	}
	info = strings.TrimSpace(t[n:])
	if t[0] == '`' && strings.Contains(info, "`") {
		return "", "", false // an inline span such as ```x```, not a fence
	}
	return t[:n], info, true
}

// closesFence reports whether line closes a block opened by fence: the same
// character, at least as many times, and nothing else.
func closesFence(line, fence string) bool {
	t := strings.TrimSpace(line)
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == "" && t[0] == fence[0]
}

// heading returns the text of an ATX heading line.
func heading(line string) (string, bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return "", false
	}
	n := 0
	for n < len(t) && t[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(t) && t[n] != ' ' && t[n] != '\t') {
		return "", false
	}
	return strings.TrimSpace(strings.TrimRight(strings.TrimSpace(t[n:]), "#")), true
}

// linkRE matches an inline link's target, up to an optional title.
var linkRE = regexp.MustCompile(`\]\(\s*<?([^()\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// inline reads the code spans and links of one paragraph (its lines joined;
// a span may be wrapped across lines, a link's target may not).
func (d *Doc) inline(first int, lines []string) {
	text := strings.Join(lines, "\n")
	lineAt := func(off int) int { return first + strings.Count(text[:off], "\n") }
	var prose strings.Builder // text with spans blanked, offsets kept
	for i := 0; i < len(text); {
		if text[i] == '\\' && i+1 < len(text) {
			prose.WriteString(text[i : i+2])
			i += 2
			continue
		}
		if text[i] != '`' {
			prose.WriteByte(text[i])
			i++
			continue
		}
		n := run(text, i)
		end := closingRun(text, i+n, n)
		if end < 0 { // no closing run: the backticks are literal
			prose.WriteString(text[i : i+n])
			i += n
			continue
		}
		content := strings.ReplaceAll(text[i+n:end], "\n", " ")
		if len(content) > 2 && content[0] == ' ' && content[len(content)-1] == ' ' && strings.TrimSpace(content) != "" {
			content = content[1 : len(content)-1]
		}
		d.Spans = append(d.Spans, Span{Line: lineAt(i), Text: content})
		prose.WriteString(strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, text[i:end+n]))
		i = end + n
	}
	p := prose.String()
	for _, m := range linkRE.FindAllStringSubmatchIndex(p, -1) {
		d.Links = append(d.Links, Link{Line: lineAt(m[0]), Target: p[m[2]:m[3]]})
	}
}

// run returns the length of the run of backticks at text[i].
func run(text string, i int) int {
	n := 0
	for i+n < len(text) && text[i+n] == '`' {
		n++
	}
	return n
}

// closingRun returns the offset of the next run of exactly n backticks at
// or after from, or -1.
func closingRun(text string, from, n int) int {
	for i := from; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		m := run(text, i)
		if m == n {
			return i
		}
		i += m
	}
	return -1
}

// Anchor returns the anchor GitHub gives a heading: its text lower-cased,
// inline markup and punctuation other than '-' and '_' dropped, spaces made
// '-'. A link's text counts, its target does not.
func Anchor(heading string) string {
	heading = linkTextRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var linkTextRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
