package config

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Other clients' config files. mcpgate reads the file an MCP client
// already has, whichever client wrote it, and tells the format apart by
// its content, never by its name:
//
//   - "mcpServers" at the top (with or without "gateway"): mcpgate's own
//     format, which is Claude Desktop's claude_desktop_config.json, Claude
//     Code's .mcp.json, Cursor's .cursor/mcp.json, Windsurf's
//     mcp_config.json, Cline's cline_mcp_settings.json and Roo's
//     mcp_settings.json. Their extra server keys are accepted
//     (clients.go).
//   - "servers" at the top and no "mcpServers": VS Code's .vscode/mcp.json,
//     with its "inputs" (editorvars.go).
//   - "projects" at the top: Claude Code's ~/.claude.json. Its top-level
//     "mcpServers" are the user's servers; Options.Project selects
//     projects.<PATH>.mcpServers as well, merged over them (a project's
//     server replaces the user's of the same name, as Claude Code does).
//
// Every other top-level key belongs to another application and is
// ignored.

// Options are what ParseWith needs besides the file's bytes.
type Options struct {
	// Path is the config file's path: ${workspaceFolder} is the directory
	// holding its ".vscode" or ".cursor" directory, and a relative
	// envFile is read from there. Default "": neither can be used.
	Path string
	// Project selects, in Claude Code's ~/.claude.json, the servers of
	// projects.<Project>.mcpServers (an absolute path, as Claude Code
	// keys them) over the top-level ones. Default "": the top-level ones
	// only. A file without "projects" with a Project is a problem.
	Project string
	// LookupEnv resolves ${VAR} references. Default: no variable is set
	// (LoadWith: the process environment).
	LookupEnv func(string) (string, bool)
}

// Note is one thing Parse accepted and ignored, with the key path it is
// about; Config.Notes lists them for the caller to log (at info level).
type Note struct {
	Server string // the server's name
	Path   string
	Msg    string
}

// String returns "path: msg".
func (n Note) String() string { return n.Path + ": " + n.Msg }

// editorState is the decoder's state for other clients' formats.
type editorState struct {
	file   string           // the config file's path; "" when parsed from bytes
	inputs map[string]input // VS Code's "inputs", by id; nil: the file has none
	notes  []Note
	// root is where the servers are in the file ("mcpServers",
	// "servers"), paths where each server was read, by name: Validate
	// speaks of "mcpServers.NAME", the user must read the key path of
	// their file.
	root  string
	paths map[string]string
}

// topLevel is the members of the document that mcpgate reads.
type topLevel struct {
	gateway, mcpServers, servers, inputs, projects json.RawMessage
}

// topLevel picks the members mcpgate reads, each once.
func (d *decoder) topLevel(top []member) topLevel {
	var t topLevel
	for _, m := range top {
		var dst *json.RawMessage
		switch m.key {
		case "mcpServers":
			dst = &t.mcpServers
		case "gateway":
			dst = &t.gateway
		case "servers":
			dst = &t.servers
		case "inputs":
			dst = &t.inputs
		case "projects":
			dst = &t.projects
		default:
			continue // other applications' settings share this file
		}
		if *dst != nil {
			d.problems.add(m.key, "duplicate key")
			continue
		}
		*dst = m.val
	}
	return t
}

// present reports whether raw holds a value other than null.
func present(raw json.RawMessage) bool {
	return raw != nil && !isNull(raw)
}

// serverSources decodes the servers of whichever format the file is in.
func (d *decoder) serverSources(t topLevel, opts Options, cfg *Config) {
	d.editor.root, d.editor.paths = "mcpServers", map[string]string{}
	vscode := !present(t.mcpServers) && present(t.servers)
	if vscode {
		d.editor.root = "servers"
		// Inputs first: the servers' values refer to them.
		d.inputs("inputs", t.inputs)
		d.servers("servers", t.servers, cfg)
	} else if present(t.mcpServers) {
		d.servers("mcpServers", t.mcpServers, cfg)
	}
	if opts.Project == "" {
		if len(cfg.Servers)+len(cfg.Disabled) == 0 && present(t.projects) && !vscode {
			d.problems.add("mcpServers", "no servers configured; this is Claude Code's ~/.claude.json: "+
				"choose a project's servers with --project PATH (projects with servers: %s)", projectList(t.projects))
		}
		return
	}
	if !present(t.projects) {
		d.problems.add("", "--project %q: the file has no \"projects\" (only Claude Code's ~/.claude.json has)", opts.Project)
		return
	}
	ms, ok := members(t.projects)
	if !ok {
		d.problems.add("projects", "must be an object of projects")
		return
	}
	want := filepath.Clean(opts.Project)
	for _, m := range ms {
		if filepath.Clean(m.key) != want {
			continue
		}
		p := projectPath(m.key)
		var servers json.RawMessage
		d.fields(p, m.val, "an object", func(key, _ string, v json.RawMessage) bool {
			if key == "mcpServers" {
				servers = v
			}
			return true // the project's other settings are Claude Code's
		})
		if present(servers) {
			d.servers(join(p, "mcpServers"), servers, cfg)
		}
		return
	}
	d.problems.add("projects", "no project %q (projects with servers: %s)", opts.Project, projectList(t.projects))
}

// projectPath is the key path of project key in ~/.claude.json: project
// keys are paths, full of dots and slashes, so they are quoted.
func projectPath(key string) string {
	return fmt.Sprintf("projects[%q]", key)
}

// projectList names the projects of ~/.claude.json that have servers,
// sorted, for a problem's hint.
func projectList(raw json.RawMessage) string {
	ms, _ := members(raw)
	var names []string
	for _, m := range ms {
		pm, _ := members(m.val)
		for _, f := range pm {
			if f.key == "mcpServers" && kind(f.val) == '{' && len(strings.TrimSpace(string(f.val))) > 2 {
				names = append(names, fmt.Sprintf("%q", m.key))
			}
		}
	}
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// underServers reports whether path is about a server entry (or the
// object of servers).
func (d *decoder) underServers(path string) bool {
	for _, p := range d.editor.paths {
		if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") {
			return true
		}
	}
	return strings.HasPrefix(path, d.editor.root+".")
}

// filePath rewrites a path Validate gives ("mcpServers.NAME...") to where
// the file has it ("servers.NAME...", "projects[...].mcpServers.NAME...").
func (d *decoder) filePath(path string) string {
	if path == "mcpServers" {
		return d.editor.root
	}
	// The longest name first: a name may be another's prefix ("a", "a.b").
	names := make([]string, 0, len(d.editor.paths))
	for name := range d.editor.paths {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, name := range names {
		v := join("mcpServers", name)
		if path == v || strings.HasPrefix(path, v+".") || strings.HasPrefix(path, v+"[") {
			return d.editor.paths[name] + path[len(v):]
		}
	}
	return path
}
