package config

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Editor variables, as VS Code and Cursor expand them in their MCP
// configs, in every string value that expands ${VAR}:
//
//   - ${workspaceFolder}: the directory holding the config file's
//     ".vscode" or ".cursor" directory; a file elsewhere has none (a
//     problem naming the key).
//   - ${workspaceFolderBasename}: its last element.
//   - ${userHome}: $HOME.
//   - ${env:NAME}: the environment variable NAME (a problem when unset).
//   - ${pathSeparator} and ${/}: "/".
//   - ${input:ID}: VS Code asks its user for an input declared in the
//     file's "inputs"; a gateway asks no one, so it reads the environment
//     variable MCPGATE_INPUT_<ID> (ID upper-cased, each character other
//     than a letter or digit made '_'), else the input's "default", else
//     the reference is a problem naming the input, the variable and the
//     key.

// input is one entry of VS Code's "inputs".
type input struct {
	def    string
	hasDef bool
}

// inputs decodes VS Code's "inputs" array at path; only "id" and
// "default" matter here, the rest ("type", "description", "password",
// "options") is the editor's prompt.
func (d *decoder) inputs(path string, raw json.RawMessage) {
	d.editor.inputs = map[string]input{}
	if !present(raw) {
		return
	}
	elems, ok := array(raw)
	if !ok {
		d.problems.add(path, `must be an array of inputs like {"type": "promptString", "id": "api-key"}`)
		return
	}
	for i, e := range elems {
		p := index(path, i)
		var id string
		var in input
		d.object(p, e, "an object", true, func(key, kp string, v json.RawMessage) bool {
			switch key {
			case "id":
				if d.str(kp, v, &id, false) && id == "" {
					d.problems.add(kp, "must not be empty")
				}
			case "default":
				in.hasDef = d.str(kp, v, &in.def, false)
			}
			return true
		})
		if id == "" {
			d.problems.add(join(p, "id"), "required")
			continue
		}
		d.editor.inputs[id] = in
	}
}

// InputVariable is the environment variable that answers VS Code's
// ${input:ID}.
func InputVariable(id string) string {
	var b strings.Builder
	b.WriteString("MCPGATE_INPUT_")
	for _, c := range strings.ToUpper(id) {
		if 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// editorVar resolves ref (what is between "${" and "}") when it is an
// editor variable; ok false leaves it to the ${VAR} expansion.
func (d *decoder) editorVar(ref string) (val, msg string, ok bool) {
	if name, found := strings.CutPrefix(ref, "env:"); found {
		if v, set := d.lookupEnv(name); set {
			return v, "", true
		}
		return "", fmt.Sprintf("environment variable %q is not set (for ${env:%s})", name, name), true
	}
	if id, found := strings.CutPrefix(ref, "input:"); found {
		return d.input(id)
	}
	switch ref {
	case "workspaceFolder", "workspaceFolderBasename":
		ws, why := d.workspace()
		if why != "" {
			return "", fmt.Sprintf("${%s}: %s", ref, why), true
		}
		if ref == "workspaceFolderBasename" {
			ws = filepath.Base(ws)
		}
		return ws, "", true
	case "userHome":
		if v, set := d.lookupEnv("HOME"); set && v != "" {
			return v, "", true
		}
		return "", "${userHome}: HOME is not set", true
	case "pathSeparator", "/":
		return "/", "", true
	}
	return "", "", false
}

// input resolves ${input:id}.
func (d *decoder) input(id string) (val, msg string, ok bool) {
	in, declared := d.editor.inputs[id]
	if !declared {
		return "", fmt.Sprintf("${input:%s}: no input %q is declared in \"inputs\"", id, id), true
	}
	env := InputVariable(id)
	if v, set := d.lookupEnv(env); set {
		return v, "", true
	}
	if in.hasDef {
		return in.def, "", true
	}
	return "", fmt.Sprintf("${input:%s}: the gateway cannot prompt for input %q: set the environment variable %s", id, id, env), true
}

// workspace returns the workspace folder of the config file: the parent
// of the ".vscode" or ".cursor" directory holding it; or why there is
// none.
func (d *decoder) workspace() (dir, why string) {
	if d.editor.file == "" {
		return "", "the config was not read from a file"
	}
	abs, err := filepath.Abs(d.editor.file)
	if err != nil {
		return "", err.Error()
	}
	parent := filepath.Dir(abs)
	switch filepath.Base(parent) {
	case ".vscode", ".cursor":
		return filepath.Dir(parent), ""
	}
	return "", "the config file is not in a .vscode or .cursor directory, so it has no workspace folder (write the path)"
}
