package config

import (
	"slices"
	"testing"
)

func fakeEnv(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestExpand(t *testing.T) {
	env := fakeEnv(map[string]string{"HOME": "/home/u", "EMPTY": "", "TOKEN": "s3cr$t${X}"})
	tests := []struct {
		in   string
		want string
		msgs []string
	}{
		{in: "plain", want: "plain"},
		{in: "", want: ""},
		{in: "${HOME}/x", want: "/home/u/x"},
		{in: "a${HOME}b${HOME}c", want: "a/home/ub/home/uc"},
		{in: "$HOME", want: "$HOME"},                       // $ without { is literal
		{in: "cost: $5, $$ {x}", want: "cost: $5, $$ {x}"}, // likewise
		{in: "${MISSING:-fallback}", want: "fallback"},
		{in: "${MISSING:-}", want: ""},
		{in: "${EMPTY:-fallback}", want: "fallback"}, // as in the shell, :- covers empty
		{in: "${EMPTY}", want: ""},                   // set but empty is not missing
		{in: "${HOME:-/tmp}", want: "/home/u"},
		{in: "${MISSING:-a:-b}", want: "a:-b"},
		{in: "${TOKEN}", want: "s3cr$t${X}"}, // values are not expanded again
		{in: "$${HOME}", want: "$/home/u"},
		{in: "${MISSING}", msgs: []string{`environment variable "MISSING" is not set`}},
		{in: "${A}-${B}", msgs: []string{
			`environment variable "A" is not set`,
			`environment variable "B" is not set`,
		}},
		{in: "x${HOME", msgs: []string{`unterminated "${" (write ${NAME} or ${NAME:-default})`}},
		{in: "${}", msgs: []string{`invalid variable reference "${}"`}},
		{in: "${1X}", msgs: []string{`invalid variable reference "${1X}"`}},
		{in: "${A B}", msgs: []string{`invalid variable reference "${A B}"`}},
		{in: "${:-x}", msgs: []string{`invalid variable reference "${:-x}"`}},
	}
	for _, tt := range tests {
		got, msgs := expand(tt.in, env, nil)
		if !slices.Equal(msgs, tt.msgs) {
			t.Errorf("expand(%q) problems = %q, want %q", tt.in, msgs, tt.msgs)
			continue
		}
		if tt.msgs == nil && got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
