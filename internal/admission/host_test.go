package admission

import "testing"

func TestRequestHost(t *testing.T) {
	for in, want := range map[string]string{
		"LocalHost:8080": "localhost", "[::1]:9": "::1", "[::1]": "::1", "Example.COM": "example.com", "": "",
		"localhost:": "localhost",
		// net/http accepts these Host values; they are not localhost.
		"localhost:1,evil.example": "localhost:1,evil.example", "[::1]:x!evil": "[::1]:x!evil",
	} {
		if got := RequestHost(in); got != want {
			t.Errorf("RequestHost(%q) = %q, want %q", in, got, want)
		}
	}
}
