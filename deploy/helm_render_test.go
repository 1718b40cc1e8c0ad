package deploy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"go.yaml.in/yaml/v3"
)

// The chart's templates are rendered here without helm: text/template
// with the few Sprig and Helm functions they use, implemented as Helm
// does. A template that calls any other function fails to parse, which
// says to add it here. Missing keys are errors (Helm prints nothing for
// them), so every .Values key a rendered branch reads must exist.

// helmFuncs returns the functions the templates may call. include needs
// the template set, given through tmpl once it is built.
func helmFuncs(tmpl **template.Template) template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b bytes.Buffer
			err := (*tmpl).ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"default": func(d any, given ...any) any {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"trunc": func(n int, s string) string {
			if n >= 0 && len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"contains":   func(substr, s string) bool { return strings.Contains(s, substr) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"quote": func(vs ...any) string {
			out := make([]string, 0, len(vs))
			for _, v := range vs {
				if v != nil {
					out = append(out, fmt.Sprintf("%q", fmt.Sprint(v)))
				}
			}
			return strings.Join(out, " ")
		},
		"indent": indent,
		"nindent": func(n int, s string) string {
			return "\n" + indent(n, s)
		},
		"toYaml": func(v any) (string, error) {
			var b bytes.Buffer
			enc := yaml.NewEncoder(&b)
			enc.SetIndent(2)
			if err := enc.Encode(v); err != nil {
				return "", err
			}
			return strings.TrimSuffix(b.String(), "\n"), enc.Close()
		},
		"toJson": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"toPrettyJson": func(v any) (string, error) {
			b, err := json.MarshalIndent(v, "", "  ")
			return string(b), err
		},
		// fail stops the render with msg (Helm: "execution error at
		// (TEMPLATE): msg").
		"fail": func(msg string) (string, error) { return "", errors.New(msg) },
		"int":  toInt,
		"sha256sum": func(s string) string {
			sum := sha256.Sum256([]byte(s))
			return hex.EncodeToString(sum[:])
		},
		"atoi":       func(s string) int { n, _ := strconv.Atoi(s); return n },
		"toString":   toString,
		"kindIs":     func(kind string, v any) bool { return reflect.ValueOf(v).Kind().String() == kind },
		"trimPrefix": func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
		"regexMatch": func(re, s string) bool { return regexp.MustCompile(re).MatchString(s) },
		"regexFind":  func(re, s string) string { return regexp.MustCompile(re).FindString(s) },
		"regexFindAll": func(re, s string, n int) []string {
			return regexp.MustCompile(re).FindAllString(s, n)
		},
		"add": func(ns ...any) int64 {
			var sum int64
			for _, n := range ns {
				sum += int64(toInt(n))
			}
			return sum
		},
		"mul": func(first any, ns ...any) int64 {
			p := int64(toInt(first))
			for _, n := range ns {
				p *= int64(toInt(n))
			}
			return p
		},
		"div":  func(a, b any) int64 { return int64(toInt(a)) / int64(toInt(b)) },
		"list": func(vs ...any) []any { return vs },
		"dict": func(kv ...any) map[string]any {
			d := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				d[toString(kv[i])] = kv[i+1]
			}
			return d
		},
		"set": func(d map[string]any, k string, v any) map[string]any { d[k] = v; return d },
		"get": func(d map[string]any, k string) any {
			if v, ok := d[k]; ok {
				return v
			}
			return ""
		},
		"hasKey": func(d map[string]any, k string) bool { _, ok := d[k]; return ok },
		"dig":    sprigDig,
		// fromJson is Helm's: a JSON object, or one whose "Error" says why
		// the text is not one.
		"fromJson": func(s string) map[string]any {
			m := map[string]any{}
			if err := json.Unmarshal([]byte(s), &m); err != nil {
				m["Error"] = err.Error()
			}
			return m
		},
	}
}

// toString is Sprig's toString.
func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case error:
		return v.Error()
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprintf("%v", v)
}

// sprigDig is Sprig's dig KEY... DEFAULT DICT: the value at the keys' path,
// or DEFAULT where a key is missing.
func sprigDig(args ...any) (any, error) {
	if len(args) < 3 {
		return nil, errors.New("dig needs at least three arguments")
	}
	cur, ok := args[len(args)-1].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("dig: %T is not a dict", args[len(args)-1])
	}
	keys := args[:len(args)-2]
	for i, k := range keys {
		v, has := cur[toString(k)]
		if !has {
			return args[len(args)-2], nil
		}
		if i == len(keys)-1 {
			return v, nil
		}
		if cur, ok = v.(map[string]any); !ok {
			return nil, fmt.Errorf("dig: %v is %T, not a dict", k, v)
		}
	}
	return nil, nil
}

// toInt is Sprig's int: numbers of any type (Helm's values file gives
// float64, --set int64), and decimal strings; anything else is 0.
func toInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case float64:
		return int(n)
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

// empty is Sprig's notion of an empty value, which default replaces.
func empty(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.String, reflect.Array, reflect.Slice, reflect.Map:
		return r.Len() == 0
	case reflect.Bool:
		return !r.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return r.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return r.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return r.Float() == 0
	case reflect.Pointer, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// rendered is the output of a chart: the values it was rendered with, each
// template file's text, and the Kubernetes objects in it, by kind.
type rendered struct {
	values  map[string]any
	files   map[string]string
	objects map[string][]map[string]any
}

// object returns the one object of kind, failing the test if there is
// not exactly one.
func (r rendered) object(t *testing.T, kind string) map[string]any {
	t.Helper()
	if n := len(r.objects[kind]); n != 1 {
		t.Fatalf("%d objects of kind %s, want 1", n, kind)
	}
	return r.objects[kind][0]
}

// renderChart renders every template of the chart in dir with values as
// .Values, for a release named "demo", and decodes the YAML it makes.
func renderChart(t *testing.T, dir string, values map[string]any) rendered {
	t.Helper()
	r, err := tryRenderChart(t, dir, values)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryRenderChart is renderChart returning the error of a template that
// refuses the values (a fail), as helm install would, instead of failing
// the test.
func tryRenderChart(t *testing.T, dir string, values map[string]any) (rendered, error) {
	t.Helper()
	chart := readYAML(t, filepath.Join(dir, "Chart.yaml"))
	data := map[string]any{
		"Values": values,
		"Chart": map[string]any{
			"Name":       chart["name"],
			"Version":    chart["version"],
			"AppVersion": chart["appVersion"],
		},
		"Release": map[string]any{"Name": "demo", "Namespace": "default", "Service": "Helm"},
	}
	files, err := filepath.Glob(filepath.Join(dir, "templates", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("templates: %v, %v", files, err)
	}
	var tmpl *template.Template
	tmpl = template.New("chart").Funcs(helmFuncs(&tmpl)).Option("missingkey=error")
	for _, f := range files {
		if _, err := tmpl.New(filepath.Base(f)).Parse(readFile(t, f)); err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
	}
	r := rendered{values: values, files: map[string]string{}, objects: map[string][]map[string]any{}}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasPrefix(name, "_") {
			continue // defines only
		}
		var b bytes.Buffer
		if err := tmpl.ExecuteTemplate(&b, name, data); err != nil {
			return r, fmt.Errorf("render %s: %w", name, err)
		}
		r.files[name] = b.String()
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		dec := yaml.NewDecoder(&b)
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s renders bad YAML: %v\n%s", name, err, r.files[name])
			}
			if obj == nil {
				continue
			}
			kind, _ := obj["kind"].(string)
			if kind == "" || obj["apiVersion"] == nil {
				t.Fatalf("%s renders an object without kind or apiVersion:\n%s", name, r.files[name])
			}
			r.objects[kind] = append(r.objects[kind], obj)
		}
	}
	return r, nil
}

// TestHelmFuncs checks the Helm functions implemented here against what
// Helm's (Sprig's) give for the same calls.
func TestHelmFuncs(t *testing.T) {
	var tmpl *template.Template
	tmpl = template.New("t").Funcs(helmFuncs(&tmpl))
	tests := []struct{ text, want string }{
		{`{{ "" | default "x" }}`, "x"},
		{`{{ "y" | default "x" }}`, "y"},
		{`{{ 0 | default 8 }}`, "8"},
		{`{{ "abcdef" | trunc 3 }}`, "abc"},
		{`{{ "a-" | trimSuffix "-" }}`, "a"},
		{`{{ contains "b" "abc" }}`, "true"},
		{`{{ "a+b" | replace "+" "_" }}`, "a_b"},
		{`{{ "a\"b" | quote }}`, `"a\"b"`},
		{`{{ "a\nb" | nindent 2 }}`, "\n  a\n  b"},
		{`{{ dict | toYaml }}`, "{}"},
		{`{{ 3.0 | int }}`, "3"},
		{`{{ "3" | int }}`, "3"},
		{`{{ "x" | int }}`, "0"},
		{`{{ "x" | sha256sum }}`, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"},
		{`{{ atoi "015" }}`, "15"},
		{`{{ toString 3 }}{{ toString "a" }}`, "3a"},
		{`{{ kindIs "invalid" nil }} {{ kindIs "string" "" }} {{ kindIs "map" dict }}`, "true true true"},
		{`{{ trimPrefix "15" "15ms" }}`, "ms"},
		{`{{ regexMatch "^[0-9]+s$" "10s" }} {{ regexMatch "^[0-9]+s$" "1.5s" }}`, "true false"},
		{`{{ regexFind "^[0-9]+" "15ms" }}`, "15"},
		{`{{ regexFindAll "[0-9]+(ms|h|m|s)" "1h2m3s4ms" -1 }}`, "[1h 2m 3s 4ms]"},
		{`{{ add 1 2 3 }} {{ mul 2 3 4 }} {{ div 1999 1000 }}`, "6 24 1"},
		{`{{ list "a" "b" }}`, "[a b]"},
		{`{{ $d := dict "a" 1 }}{{ $_ := set $d "b" 2 }}{{ get $d "b" }}{{ get $d "c" }}{{ hasKey $d "a" }}`, "2true"},
		{`{{ dig "a" "b" "none" (dict "a" (dict "b" 7)) }} {{ dig "a" "x" "none" (dict "a" (dict "b" 7)) }}`, "7 none"},
		{`{{ (fromJson "{\"a\": 1}").a }} {{ hasKey (fromJson "[") "Error" }}`, "1 true"},
	}
	for _, tt := range tests {
		tp := template.Must(tmpl.New(tt.text).Parse(tt.text))
		var b bytes.Buffer
		if err := tp.Execute(&b, nil); err != nil {
			t.Errorf("%s: %v", tt.text, err)
		} else if b.String() != tt.want {
			t.Errorf("%s = %q, want %q", tt.text, b.String(), tt.want)
		}
	}
	if got, _ := helmFuncs(&tmpl)["toPrettyJson"].(func(any) (string, error))(map[string]any{"a": 1}); got != "{\n  \"a\": 1\n}" {
		t.Errorf("toPrettyJson = %q", got)
	}
}
