package testkit

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The fake's lists as FakeOptions shape them (extra tools, prompts,
// resources and templates, pagination, a slow tools/list), for tests of
// endpoints merging several fakes.

// CatalogOptions shapes what a fake lists. The zero value lists the
// fake's built-in tools and resources in one page each, and no prompts or
// templates.
type CatalogOptions struct {
	// ToolPageSize pages tools/list this many tools at a time (the cursor
	// is the index of the page's first tool). 0: one page.
	ToolPageSize int
	// ExtraTools are listed after the built-in tools; each answers a call
	// with the text "NAME: MESSAGE" (its own name and arguments.message),
	// so a test sees which name the server was called with.
	ExtraTools []string
	// GeneratedTools lists this many more tools after those, named
	// gen_00000, gen_00001, ..., each the size of a typical real tool
	// (about 500 bytes of JSON: a description and three arguments), and
	// answering a call as an ExtraTools tool does: a big list without a
	// long command line.
	GeneratedTools int

	// HeaderTools are listed after ExtraTools and answer as they do, with
	// their "message" annotated "x-mcp-header": "Message" (a 2026-07-28
	// client mirrors it into an Mcp-Param-Message header).
	HeaderTools []string
	// Prompts are listed by prompts/list; prompts/get of one answers with
	// one user message whose text is the prompt's name;
	// completion/complete with a ref/prompt completes to its name. With
	// Prompts or ResourceTemplates the fake has the completions
	// capability (and answers completion/complete); without, neither.
	Prompts []string
	// Resources replace the built-in resources' URIs when set; reading one
	// answers "content of URI".
	Resources []string
	// ResourceTemplates are listed by resources/templates/list; reading a
	// URI that starts with a template's text before its first '{' answers
	// "content of URI" too; completion/complete with a ref/resource
	// completes to the template.
	ResourceTemplates []string
	// ListDelay delays the answer to tools/list (until cancelled).
	ListDelay time.Duration
	// DownFile holds the fake down: while the file exists, the fake exits
	// with status 1 at start (after a line on stderr), so every restart
	// fails until the test removes it.
	DownFile string
}

// heldDown reports whether DownFile holds the fake down, saying so on
// stderr.
func heldDown(o FakeOptions) bool {
	if o.Catalog.DownFile == "" {
		return false
	}
	if _, err := os.Stat(o.Catalog.DownFile); err != nil {
		return false
	}
	fmt.Fprintf(os.Stderr, "mcptest: held down by %s\n", o.Catalog.DownFile)
	return true
}

// listTools answers tools/list, a page at a time with ToolPageSize.
func (s *server) listTools(m message, done <-chan struct{}) {
	c := s.opts.Catalog
	if c.ListDelay > 0 {
		t := time.NewTimer(c.ListDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
			return
		}
	}
	tools := toolList
	for _, name := range c.ExtraTools {
		tools = append(tools[:len(tools):len(tools)], tool(name, "Answers \"NAME: message\".", map[string]any{"message": prop("string")}))
	}
	tools = append(tools[:len(tools):len(tools)], generatedTools(c.GeneratedTools)...)

	for _, name := range c.HeaderTools {
		mirrored := map[string]any{"type": "string", "x-mcp-header": "Message"}
		tools = append(tools[:len(tools):len(tools)], tool(name, "Answers \"NAME: message\".", map[string]any{"message": mirrored}))
	}
	if c.ToolPageSize <= 0 {
		s.reply(m.ID, map[string]any{"tools": tools})
		return
	}
	var p struct {
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal(m.Params, &p)
	start := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 || n > len(tools) {
			s.replyError(m.ID, codeInvalidParams, "invalid cursor")
			return
		}
		start = n
	}
	end := min(start+c.ToolPageSize, len(tools))
	res := map[string]any{"tools": tools[start:end]}
	if end < len(tools) {
		res["nextCursor"] = strconv.Itoa(end)
	}
	s.reply(m.ID, res)
}

// callExtraTool answers a call of an ExtraTools tool; false if name is
// not one.
func (s *server) callExtraTool(id json.RawMessage, name string, a toolArgs) bool {
	for _, t := range append(s.opts.Catalog.ExtraTools[:len(s.opts.Catalog.ExtraTools):len(s.opts.Catalog.ExtraTools)], s.opts.Catalog.HeaderTools...) {
		if t == name {
			s.reply(id, textResult(name+": "+a.Message, false))
			return true
		}
	}
	if n, ok := strings.CutPrefix(name, "gen_"); ok {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 && i < s.opts.Catalog.GeneratedTools && name == generatedName(i) {
			s.reply(id, textResult(name+": "+a.Message, false))
			return true
		}
	}
	return false
}

// generatedName is the name of generated tool i.
func generatedName(i int) string { return fmt.Sprintf("gen_%05d", i) }

// generatedTools returns n generated tools (see GeneratedTools).
func generatedTools(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		name := generatedName(i)
		out[i] = tool(name,
			"Answers \""+name+": message\". A generated tool of a large catalog: it stands for one of the many operations a big API exposes, with a description as long as a real one and a few arguments.",
			map[string]any{
				"message": map[string]any{"type": "string", "description": "The text the tool answers with, after its name."},
				"limit":   map[string]any{"type": "integer", "description": "How many results to return at most.", "minimum": 1},
				"verbose": map[string]any{"type": "boolean", "description": "Whether to say more."},
			}, "message")
	}
	return out
}

// listPrompts answers prompts/list.
func (s *server) listPrompts(m message) {
	prompts := []any{}
	for _, name := range s.opts.Catalog.Prompts {
		prompts = append(prompts, map[string]any{"name": name, "description": "Answers its own name."})
	}
	s.reply(m.ID, map[string]any{"prompts": prompts})
}

// getPrompt answers prompts/get.
func (s *server) getPrompt(m message) {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(m.Params, &p)
	for _, name := range s.opts.Catalog.Prompts {
		if name == p.Name {
			s.reply(m.ID, map[string]any{"messages": []any{map[string]any{
				"role": "user", "content": map[string]any{"type": "text", "text": name},
			}}})
			return
		}
	}
	s.replyError(m.ID, codeInvalidParams, "unknown prompt")
}

// complete answers completion/complete with the ref's name or URI.
func (s *server) complete(m message) {
	var p struct {
		Ref struct {
			Type, Name, URI string
		} `json:"ref"`
	}
	_ = json.Unmarshal(m.Params, &p)
	value := p.Ref.Name
	if p.Ref.Type == "ref/resource" {
		value = p.Ref.URI
	}
	s.reply(m.ID, map[string]any{"completion": map[string]any{"values": []string{value}, "hasMore": false}})
}

// resources returns the resources the fake lists.
func (s *server) resources() []map[string]any {
	if len(s.opts.Catalog.Resources) == 0 {
		return resourceList
	}
	var out []map[string]any
	for _, uri := range s.opts.Catalog.Resources {
		out = append(out, map[string]any{"uri": uri, "name": uri, "mimeType": "text/plain"})
	}
	return out
}

// templates returns the resource templates the fake lists.
func (s *server) templates() []any {
	out := []any{}
	for _, t := range s.opts.Catalog.ResourceTemplates {
		out = append(out, map[string]any{"uriTemplate": t, "name": t, "mimeType": "text/plain"})
	}
	return out
}

// templated reports whether uri is made by one of the fake's templates.
func (s *server) templated(uri string) bool {
	for _, t := range s.opts.Catalog.ResourceTemplates {
		prefix, _, _ := strings.Cut(t, "{")
		if strings.HasPrefix(uri, prefix) && len(uri) > len(prefix) {
			return true
		}
	}
	return false
}
