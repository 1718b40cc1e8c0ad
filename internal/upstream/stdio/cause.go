package stdio

import (
	"strings"
)

// CauseLine picks, from the last stderr lines of a process that failed
// (oldest first), the one line that says why, or "" when none does. A
// failed `npx -y` or `uvx` start ends with a stack trace whose last lines
// are frames and runtime noise ("at async ModuleLoader...", "Node.js
// v22.3.0"); the line a person needs is elsewhere:
//
//   - Python: the line that ends the last traceback (the first line after
//     "Traceback (most recent call last):" that is not indented):
//     "ModuleNotFoundError: No module named 'mcp'";
//   - otherwise the first line that reads as an error: a word ending in
//     "Error" followed by ":" or a bracketed code ("Error: Cannot find
//     module 'zod'", "TypeError: x is not a function", "Error
//     [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod'"), "error:" or
//     "fatal:" or "panic:" at the start, npm's "ERR!" and "npm error" lines
//     (skipping the bare "code E404" ones when a better one follows), "command
//     not found", "not found" at the end of a shell's complaint, "ENOENT".
//
// The result is trimmed of surrounding blanks. It is untrusted text, as
// every stderr line. CauseLine is pure and never panics.
func CauseLine(lines []string) string {
	if c := tracebackEnd(lines); c != "" {
		return c
	}
	weak := ""
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || isFrame(t) {
			continue
		}
		switch {
		case isNPMLine(t):
			if npmDetail(t) {
				return t
			}
			if weak == "" {
				weak = t
			}
		case errorLine(t):
			return t
		}
	}
	return weak
}

// tracebackEnd returns the line ending the last Python traceback in lines,
// or "".
func tracebackEnd(lines []string) string {
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "Traceback (most recent call last)") {
			last = i
		}
	}
	if last < 0 {
		return ""
	}
	for _, l := range lines[last+1:] {
		if l == "" || l[0] == ' ' || l[0] == '\t' {
			continue // a frame, its source line, or a caret line
		}
		return strings.TrimSpace(l)
	}
	return "" // cut before its end: the window lost it
}

// isFrame reports a stack frame line: a JavaScript "at f (file:1:2)" or a
// Go "main.go:12 +0x1d"-style one is never the cause.
func isFrame(t string) bool {
	return strings.HasPrefix(t, "at ") || strings.HasPrefix(t, "File \"")
}

// isNPMLine reports a line of npm's own error report.
func isNPMLine(t string) bool {
	return strings.HasPrefix(t, "npm ERR!") || strings.HasPrefix(t, "npm error")
}

// npmDetail reports an npm error line that carries a detail, not one of
// its bookkeeping lines ("code E404", "errno -2", "A complete log of this
// run can be found in: ...").
func npmDetail(t string) bool {
	rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(t, "npm ERR!"), "npm error"))
	if rest == "" {
		return false
	}
	for _, p := range []string{"code ", "errno ", "syscall ", "path ", "A complete log", "Log files were not written", "You can rerun"} {
		if strings.HasPrefix(rest, p) {
			return false
		}
	}
	return true
}

// errorLine reports a trimmed line that reads as an error message.
func errorLine(t string) bool {
	for _, p := range []string{"error:", "error[", "Error:", "fatal:", "FATAL:", "panic:", "ERROR:"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	if strings.Contains(t, "ERR!") || strings.Contains(t, "command not found") ||
		strings.Contains(t, "ENOENT") || strings.HasSuffix(t, ": not found") {
		return true
	}
	return hasErrorWord(t)
}

// hasErrorWord reports a word ending in "Error" (or "Exception") that is
// followed by ":" or by " [CODE]:" as JavaScript, Python and Java write
// a thrown error: "Error: x", "ModuleNotFoundError: x",
// "Error [ERR_MODULE_NOT_FOUND]: x", "java.lang.IllegalStateException: x".
func hasErrorWord(t string) bool {
	for _, word := range []string{"Error", "Exception"} {
		for from := 0; from < len(t); {
			i := strings.Index(t[from:], word)
			if i < 0 {
				break
			}
			i += from
			end := i + len(word)
			from = end
			// The word must start the line or follow a non-letter
			// (a space, a dot of a qualified name) after its own letters:
			// "SyntaxError" counts, "MyErrorHandler" does not (no ':').
			rest := t[end:]
			if strings.HasPrefix(rest, " [") {
				if j := strings.Index(rest, "]:"); j > 2 && !strings.ContainsAny(rest[2:j], " \t") {
					return true
				}
				continue
			}
			if strings.HasPrefix(rest, ":") && wordStart(t, i) {
				return true
			}
		}
	}
	return false
}

// wordStart reports whether the identifier that holds the "Error" at i in
// t starts the line or follows a blank, a dot or an opening bracket:
// "Uncaught TypeError:" and "java.io.IOError:" count, "x=Error:" does not.
func wordStart(t string, i int) bool {
	j := i
	for j > 0 && isIdent(t[j-1]) {
		j--
	}
	return j == 0 || t[j-1] == ' ' || t[j-1] == '.' || t[j-1] == '\t' || t[j-1] == '(' || t[j-1] == '['
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
