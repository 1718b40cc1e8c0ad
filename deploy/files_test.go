package deploy

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// readFile returns the file's text, failing the test if it cannot be read.
func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// readYAML decodes the YAML file at path into a generic map.
func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(readFile(t, path)), &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// dig walks m along keys, failing the test if a key is missing or a value
// on the way is not a map.
func dig(t *testing.T, m any, keys ...string) any {
	t.Helper()
	cur := m
	for i, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: not a map but %T", strings.Join(keys[:i], "."), cur)
		}
		if cur, ok = mm[k]; !ok {
			t.Fatalf("%s: missing", strings.Join(keys[:i+1], "."))
		}
	}
	return cur
}

// digString is dig for a string value.
func digString(t *testing.T, m any, keys ...string) string {
	t.Helper()
	v := dig(t, m, keys...)
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s: %v is %T, not a string", strings.Join(keys, "."), v, v)
	}
	return s
}

// mergeValues deep-merges over into base as Helm merges -f files: maps
// key by key, anything else replaced. base is not modified.
func mergeValues(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = mergeValues(bm, om)
		} else {
			out[k] = v
		}
	}
	return out
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int    // where it starts, 1-based
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// stage is one FROM and what follows it.
type stage struct {
	from, name string
	instrs     []instruction
}

// last returns the stage's last instruction cmd, or ok false.
func (s stage) last(cmd string) (instruction, bool) {
	for i := len(s.instrs) - 1; i >= 0; i-- {
		if s.instrs[i].cmd == cmd {
			return s.instrs[i], true
		}
	}
	return instruction{}, false
}

// dockerfile is a parsed Dockerfile: the ARGs before the first FROM (with
// their defaults) and the stages.
type dockerfile struct {
	globalArgs map[string]string
	stages     []stage
}

// parseDockerfile reads the instructions of a Dockerfile: comments and
// blank lines dropped, lines ending in a backslash joined. Heredocs are
// not supported (the files here use none).
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	df := dockerfile{globalArgs: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, path)))
	var cur strings.Builder
	start := 0
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			st := stage{}
			for i := 0; i < len(f); i++ {
				switch {
				case strings.HasPrefix(f[i], "--"):
				case strings.EqualFold(f[i], "AS") && i+1 < len(f):
					st.name = f[i+1]
					i++
				default:
					st.from = f[i]
				}
			}
			df.stages = append(df.stages, st)
		case len(df.stages) == 0:
			if in.cmd != "ARG" {
				t.Fatalf("%s:%d: %s before the first FROM", path, in.line, in.cmd)
			}
			name, def, _ := strings.Cut(in.args, "=")
			df.globalArgs[name] = def
		default:
			df.stages[len(df.stages)-1].instrs = append(df.stages[len(df.stages)-1].instrs, in)
		}
	}
	if cur.Len() > 0 {
		t.Fatalf("%s: ends in a continuation line", path)
	}
	if len(df.stages) == 0 {
		t.Fatalf("%s: no FROM", path)
	}
	return df
}

// execForm decodes an instruction in exec form (a JSON array), failing the
// test if it is in shell form: shell form puts /bin/sh in front, which the
// distroless image lacks and which would take the signals.
func execForm(t *testing.T, path string, in instruction) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(in.args), &argv); err != nil {
		t.Fatalf("%s:%d: %s %s is not in exec form: %v", path, in.line, in.cmd, in.args, err)
	}
	return argv
}

// unit is a parsed systemd unit file: section → key → values in order
// (a key may repeat, as Environment= does).
type unit map[string]map[string][]string

// one returns the last value of section.key (a later assignment wins), or
// "" if it is not set.
func (u unit) one(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// parseUnit reads a systemd unit as systemd.syntax(7) describes: [Section]
// headers, Key=Value lines, # and ; comments, backslash continuations.
func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(readFile(t, path)))
	var cur strings.Builder
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || line[0] == '#' || line[0] == ';') {
			continue
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		line = cur.String()
		cur.Reset()
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: %q is not Key=Value in a section", path, n, line)
		}
		key = strings.TrimSpace(key)
		u[section][key] = append(u[section][key], strings.TrimSpace(value))
	}
	return u
}
