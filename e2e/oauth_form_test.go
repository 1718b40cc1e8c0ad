package e2e

import (
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// The sign-in and consent pages' forms, as the tests' user agent reads them: only what it needs
// of the HTML (the action and the csrf field), so a change of the pages' look does not break
// the tests while a change of the form contract does.

var (
	formTag   = regexp.MustCompile(`(?is)<form\b([^>]*)>(.*?)</form>`)
	inputTag  = regexp.MustCompile(`(?is)<input\b([^>]*)>`)
	attribute = regexp.MustCompile(`(?is)\b([a-z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))`)
)

// attrs returns the attributes of a tag's inside, names lower-cased, values unescaped.
func attrs(s string) map[string]string {
	m := map[string]string{}
	for _, a := range attribute.FindAllStringSubmatch(s, -1) {
		m[strings.ToLower(a[1])] = html.UnescapeString(a[2] + a[3] + a[4])
	}
	return m
}

// scrapeForm finds, in an HTML page, the first POST form whose action's path ends in
// pathSuffix, and returns its action (as written, unescaped) and the value of its input named
// "csrf". It reads only what html/template writes: double- or single-quoted or bare attribute
// values, entities escaped.
func scrapeForm(body, pathSuffix string) (action, csrf string, ok bool) {
	for _, f := range formTag.FindAllStringSubmatch(body, -1) {
		a := attrs(f[1])
		if !strings.EqualFold(a["method"], "post") {
			continue
		}
		u, err := url.Parse(a["action"])
		if err != nil || !strings.HasSuffix(u.Path, pathSuffix) {
			continue
		}
		for _, in := range inputTag.FindAllStringSubmatch(f[2], -1) {
			if ia := attrs(in[1]); ia["name"] == "csrf" && ia["value"] != "" {
				return a["action"], ia["value"], true
			}
		}
	}
	return "", "", false
}

func TestScrapeForm(t *testing.T) {
	for _, tc := range []struct {
		name, body, suffix, action, csrf string
		ok                               bool
	}{
		{"template output", `<form method="post" action="/oauth/login?request=r1&amp;x=1"><input type="hidden" name="csrf" value="c&#43;1"><input name="username"></form>`,
			"/oauth/login", "/oauth/login?request=r1&x=1", "c+1", true},
		{"issuer path and attribute order", `<FORM action='/gw/oauth/consent?request=r2' METHOD=POST><input value="tok" type=hidden name=csrf /></FORM>`,
			"/oauth/consent", "/gw/oauth/consent?request=r2", "tok", true},
		{"second form is the one", `<form method="post" action="/oauth/passkeys/begin"><input name="csrf" value="a"></form><form method="post" action="/oauth/login?request=r3"><input name="csrf" value="b"></form>`,
			"/oauth/login", "/oauth/login?request=r3", "b", true},
		{"GET form ignored", `<form method="get" action="/oauth/login"><input name="csrf" value="a"></form>`, "/oauth/login", "", "", false},
		{"no csrf", `<form method="post" action="/oauth/login"><input name="username"></form>`, "/oauth/login", "", "", false},
		{"empty csrf", `<form method="post" action="/oauth/login"><input name="csrf" value=""></form>`, "/oauth/login", "", "", false},
		{"other path", `<form method="post" action="/oauth/loginx"><input name="csrf" value="a"></form>`, "/oauth/login", "", "", false},
		{"no form", `<p>error</p>`, "/oauth/login", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			action, csrf, ok := scrapeForm(tc.body, tc.suffix)
			if action != tc.action || csrf != tc.csrf || ok != tc.ok {
				t.Errorf("scrapeForm = %q, %q, %v; want %q, %q, %v", action, csrf, ok, tc.action, tc.csrf, tc.ok)
			}
		})
	}
}

// FuzzScrapeForm: any page is read without a panic, and what is found is a POST form's
// action ending in the suffix with a non-empty csrf.
func FuzzScrapeForm(f *testing.F) {
	f.Add(`<form method="post" action="/oauth/login?request=r1"><input type="hidden" name="csrf" value="c"></form>`, "/oauth/login")
	f.Add(`<form method=post action='/oauth/consent'><input name=csrf value=x></form>`, "/oauth/consent")
	f.Add(`<form<form method="post" action="&amp;"><input name="csrf" value="&#"></form>`, "")
	f.Fuzz(func(t *testing.T, body, suffix string) {
		action, csrf, ok := scrapeForm(body, suffix)
		if !ok {
			if action != "" || csrf != "" {
				t.Fatalf("not found but returned %q, %q", action, csrf)
			}
			return
		}
		u, err := url.Parse(action)
		if err != nil || !strings.HasSuffix(u.Path, suffix) || csrf == "" {
			t.Fatalf("found action %q (%v), csrf %q for suffix %q", action, err, csrf, suffix)
		}
	})
}
