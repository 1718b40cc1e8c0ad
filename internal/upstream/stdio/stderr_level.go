package stdio

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strconv"
)

// This file reads the level a stderr line names, so that a server's errors
// are logged as errors and its debug chatter as debug. Servers log in every
// format there is; these are the ones recognised, each with an example:
//
//	{"level":"error","msg":"..."}        a JSON line: "level", "lvl" or "severity",
//	{"level":50,"msg":"..."}             as a word or a pino/bunyan number
//	time=... level=warn msg="..."        logfmt: level=, lvl= or severity=
//	ERROR: bad token                     the first word, in any case
//	Error: Cannot find module 'x'        (Node's uncaught exceptions)
//	WARNING:root:disk almost full        (Python's logging default)
//	[2024-05-01T10:00:00Z INFO  srv] up  a word in brackets, in any case
//	2024/05/01 10:00:00 DEBUG cache hit  a word in capitals
//	2024-05-01 10:00:00,123 - x - ERROR - y
//
// Only the first levelWindow bytes are searched for a word, so that the
// text of a message ("... returned ERROR") does not decide its level. A
// line that names no level gets the server's default (StderrLevel).

// levelWindow is how much of a line's start is searched for a level word.
const levelWindow = 80

// levelKeyWindow is how much of a line is searched for "level=".
const levelKeyWindow = 256

// stderrLevel returns the level line names, or def.
func stderrLevel(line []byte, def slog.Level) slog.Level {
	if l, ok := jsonLevel(line); ok {
		return l
	}
	if l, ok := logfmtLevel(line[:min(len(line), levelKeyWindow)]); ok {
		return l
	}
	if l, ok := wordLevel(line[:min(len(line), levelWindow)]); ok {
		return l
	}
	return def
}

// jsonLevel reads the level of a JSON object line.
func jsonLevel(line []byte) (slog.Level, bool) {
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' {
		return 0, false
	}
	var rec struct {
		Level    json.RawMessage `json:"level"`
		Lvl      json.RawMessage `json:"lvl"`
		Severity json.RawMessage `json:"severity"`
	}
	if json.Unmarshal(line, &rec) != nil {
		return 0, false
	}
	for _, v := range []json.RawMessage{rec.Level, rec.Lvl, rec.Severity} {
		if len(v) == 0 {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			if l, ok := levelOf([]byte(s)); ok {
				return l, true
			}
			continue
		}
		if n, err := strconv.Atoi(string(v)); err == nil {
			return pinoLevel(n), true
		}
	}
	return 0, false
}

// pinoLevel maps the numbers of pino and bunyan (10 trace, 20 debug, 30
// info, 40 warn, 50 error, 60 fatal).
func pinoLevel(n int) slog.Level {
	switch {
	case n >= 50:
		return slog.LevelError
	case n >= 40:
		return slog.LevelWarn
	case n >= 30:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// logfmtLevel reads a level=WORD (lvl=, severity=) pair, quoted or not.
func logfmtLevel(b []byte) (slog.Level, bool) {
	for _, key := range [...]string{"level=", "lvl=", "severity="} {
		i := 0
		for {
			j := bytes.Index(b[i:], []byte(key))
			if j < 0 {
				break
			}
			at := i + j
			i = at + len(key)
			if at > 0 && b[at-1] != ' ' && b[at-1] != '\t' {
				continue // "loglevel=" is another key
			}
			v := bytes.TrimPrefix(b[i:], []byte(`"`))
			end := 0
			for end < len(v) && isLetter(v[end]) {
				end++
			}
			if l, ok := levelOf(v[:end]); ok {
				return l, true
			}
		}
	}
	return 0, false
}

// wordLevel finds the first level word of b that is the line's first word,
// in brackets, or in capitals.
func wordLevel(b []byte) (slog.Level, bool) {
	first := true
	for i := 0; i < len(b); {
		if !isLetter(b[i]) {
			i++
			continue
		}
		start := i
		for i < len(b) && isLetter(b[i]) {
			i++
		}
		if i == len(b) && len(b) == levelWindow {
			break // cut by the window: not a whole word
		}
		w := b[start:i]
		bracketed := start > 0 && (b[start-1] == '[' || b[start-1] == '<') && i < len(b) && (b[i] == ']' || b[i] == '>')
		if first || bracketed || isUpper(w) {
			if l, ok := levelOf(w); ok {
				return l, true
			}
		}
		first = false
	}
	return 0, false
}

// levelOf maps a level word, in any case, to a slog level.
func levelOf(w []byte) (slog.Level, bool) {
	if len(w) > len("information") {
		return 0, false
	}
	var buf [len("information")]byte
	for i, c := range w {
		buf[i] = c | 0x20 // ASCII letters only: lower case
	}
	switch string(buf[:len(w)]) {
	case "trace", "debug", "dbg", "verbose":
		return slog.LevelDebug, true
	case "info", "information", "notice":
		return slog.LevelInfo, true
	case "warn", "warning":
		return slog.LevelWarn, true
	case "error", "err", "fatal", "critical", "crit", "panic", "alert", "emerg", "emergency", "severe":
		return slog.LevelError, true
	}
	return 0, false
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isUpper(w []byte) bool {
	for _, c := range w {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}
