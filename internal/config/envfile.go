package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxEnvFileBytes bounds an envFile: it holds a few variables, and a
// path to something else (a device, a log) must not be read whole.
const maxEnvFileBytes = 1 << 20

// envFile reads s.EnvFile (the key at path) into s.Env: the file's
// variables under the entry's own "env", which win, as VS Code and Cursor
// apply them. A relative path is relative to the workspace folder, or
// else to the config file's directory.
func (d *decoder) envFile(path string, s *Server) {
	name := s.EnvFile
	if !filepath.IsAbs(name) {
		base, why := d.workspace()
		if why != "" && d.editor.file != "" {
			base, why = filepath.Dir(d.editor.file), ""
		}
		if why != "" {
			d.problems.add(path, "%q is relative, and %s", name, why)
			return
		}
		name = filepath.Join(base, name)
	}
	f, err := os.Open(name)
	if err != nil {
		d.problems.add(path, "%v", err)
		return
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxEnvFileBytes+1))
	if err != nil {
		d.problems.add(path, "%v", err)
		return
	}
	if len(data) > maxEnvFileBytes {
		d.problems.add(path, "%s is larger than %d bytes", name, maxEnvFileBytes)
		return
	}
	vars, err := ParseEnvFile(string(data))
	if err != nil {
		d.problems.add(path, "%s: %v", name, err)
		return
	}
	if s.Env == nil {
		s.Env = map[string]string{}
	}
	for k, v := range vars {
		if _, set := s.Env[k]; !set {
			s.Env[k] = v
		}
	}
}

// ParseEnvFile parses a dotenv file: one KEY=VALUE a line; blank lines
// and lines starting with '#' are skipped; "export " before a key is
// allowed; a value in double quotes may hold \n, \t, \" and \\ escapes, a
// value in single quotes is taken as is; an unquoted value ends before
// " #" and is trimmed. Nothing is expanded. The error names the line.
func ParseEnvFile(text string) (map[string]string, error) {
	vars := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, val, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || !validVarName(key) {
			return nil, fmt.Errorf("line %d: not KEY=VALUE", i+1)
		}
		v, err := envValue(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %v", i+1, key, err)
		}
		vars[key] = v
	}
	return vars, nil
}

// envValue unquotes one value of an env file.
func envValue(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	switch q := v[0]; q {
	case '\'':
		end := strings.IndexByte(v[1:], '\'')
		if end < 0 {
			return "", fmt.Errorf("unterminated single quote")
		}
		return v[1 : 1+end], nil
	case '"':
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '"':
				return b.String(), nil
			case c == '\\' && i+1 < len(v):
				i++
				switch v[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case 'r':
					b.WriteByte('\r')
				default:
					b.WriteByte(v[i])
				}
			default:
				b.WriteByte(c)
			}
		}
		return "", fmt.Errorf("unterminated double quote")
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v), nil
}
