package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The problems Parse reports, each naming its key path and value.

// TestParseProblems checks that each mistake is reported, alone, at its path.
func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"syntax", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}",
			[]string{`invalid JSON at line 3, column 26: invalid character '}' looking for beginning of object key string`}},
		{"empty file", ``, []string{`invalid JSON at line 1, column 1: unexpected end of JSON input`}},
		{"not an object", `[]`, []string{`the config must be a JSON object`}},
		{"no mcpServers", `{"gateway": {}}`, []string{`mcpServers: no servers configured`}},
		{"empty mcpServers", `{"mcpServers": {}}`, []string{`mcpServers: no servers configured`}},
		{"null mcpServers", `{"mcpServers": null}`, []string{`mcpServers: no servers configured`}},
		{"mcpServers not an object", `{"mcpServers": []}`, []string{`mcpServers: must be an object of servers`}},
		{"gateway not an object", `{"mcpServers": {"a": {"command": "x"}}, "gateway": "fast"}`,
			[]string{`gateway: must be an object`}},
		{"server not an object", `{"mcpServers": {"a": "npx"}}`, []string{`mcpServers.a: must be an object`}},
		{"server null", `{"mcpServers": {"a": null}}`, []string{`mcpServers.a: must be an object`}},
		{"unknown server key", `{"mcpServers": {"memory": {"comand": "npx"}}}`, []string{
			`mcpServers.memory.comand: unknown key`,
			`mcpServers.memory.command: required`,
		}},
		{"keys are case sensitive", `{"mcpServers": {"a": {"command": "x", "Args": []}}}`,
			[]string{`mcpServers.a.Args: unknown key`}},
		{"unknown gateway key", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"port": 80}}`,
			[]string{`gateway.port: unknown key`}},
		{"unknown root key", `{"mcpServers": {"a": {"command": "x", "roots": [{"uri": "file:///", "path": "/"}]}}}`,
			[]string{`mcpServers.a.roots[0].path: unknown key`}},
		{"duplicate top-level key", `{"mcpServers": {"a": {"command": "x"}}, "mcpServers": {}}`,
			[]string{`mcpServers: duplicate key`}},
		{"duplicate server", `{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}`,
			[]string{`mcpServers.a: duplicate key`}},
		{"duplicate server key", `{"mcpServers": {"a": {"command": "x", "command": "y"}}}`,
			[]string{`mcpServers.a.command: duplicate key`}},
		{"duplicate env key", `{"mcpServers": {"a": {"command": "x", "env": {"K": "1", "K": "2"}}}}`,
			[]string{`mcpServers.a.env.K: duplicate key`}},
		{"duplicate gateway key", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"listen": ":1", "listen": ":2"}}`,
			[]string{`gateway.listen: duplicate key`}},
		{"ignored keys may repeat", `{"x": 1, "x": 2, "mcpServers": {"a": {"command": "x"}}}`, nil},
		{"command type", `{"mcpServers": {"a": {"command": ["npx"]}}}`, []string{`mcpServers.a.command: must be a string`}},
		{"args type", `{"mcpServers": {"a": {"command": "x", "args": "-y"}}}`, []string{`mcpServers.a.args: must be an array of strings`}},
		{"args element type", `{"mcpServers": {"a": {"command": "x", "args": ["-y", 3, true]}}}`, []string{
			`mcpServers.a.args[1]: must be a string`,
			`mcpServers.a.args[2]: must be a string`,
		}},
		{"env type", `{"mcpServers": {"a": {"command": "x", "env": ["A=1"]}}}`, []string{`mcpServers.a.env: must be an object of strings`}},
		{"env value type", `{"mcpServers": {"a": {"command": "x", "env": {"PORT": 8080}}}}`, []string{`mcpServers.a.env.PORT: must be a string`}},
		{"env name", `{"mcpServers": {"a": {"command": "x", "env": {"A=B": "1"}}}}`, []string{`mcpServers.a.env.A=B: invalid environment variable name`}},
		// The remote transport refuses these when a session opens: validate
		// must name them, not leave every session to fail with 503.
		{"header value with CR LF", `{"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer x\r\nX-Evil: 1"}}}}`,
			[]string{`mcpServers.a.headers.Authorization: value contains a control character (CR, LF, NUL...)`}},
		{"header name", `{"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"Bad Name": "v", "": "v"}}}}`, []string{
			`mcpServers.a.headers.: invalid header name`,
			`mcpServers.a.headers.Bad Name: invalid header name`,
		}},
		{"reserved header", `{"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"mcp-session-id": "s", "Content-Type": "text/plain"}}}}`, []string{
			`mcpServers.a.headers.Content-Type: set by the gateway's transport; remove it`,
			`mcpServers.a.headers.mcp-session-id: set by the gateway's transport; remove it`,
		}},
		{"int type", `{"mcpServers": {"a": {"command": "x", "maxInFlight": "4"}}}`, []string{`mcpServers.a.maxInFlight: must be an integer`}},
		{"int fraction", `{"mcpServers": {"a": {"command": "x", "maxInFlight": 1.5}}}`, []string{`mcpServers.a.maxInFlight: must be an integer, not 1.5`}},
		{"int too large", `{"mcpServers": {"a": {"command": "x", "maxLineBytes": 99999999999999999999}}}`,
			[]string{`mcpServers.a.maxLineBytes: 99999999999999999999 is too large`}},
		{"int negative", `{"mcpServers": {"a": {"command": "x", "maxInFlight": -1}}}`, []string{`mcpServers.a.maxInFlight: must be at least 0, not -1`}},
		{"zero line limit", `{"mcpServers": {"a": {"command": "x", "maxLineBytes": 0}}}`, []string{`mcpServers.a.maxLineBytes: must be at least 1, not 0`}},
		{"duration without unit", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"drainTimeout": "10"}}`,
			[]string{`gateway.drainTimeout: "10" is not a duration (use e.g. "10s")`}},
		{"duration as number", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"drainTimeout": 10}}`,
			[]string{`gateway.drainTimeout: 10 is not a duration (use e.g. "10s")`}},
		{"duration garbage", `{"mcpServers": {"a": {"command": "x", "timeout": "soon"}}}`,
			[]string{`mcpServers.a.timeout: "soon" is not a duration (use e.g. "5m")`}},
		{"duration type", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"requestTimeout": true}}`,
			[]string{`gateway.requestTimeout: must be a duration string (e.g. "5m")`}},
		{"duration zero", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"keepAliveInterval": "0s"}}`,
			[]string{`gateway.keepAliveInterval: must be greater than 0, not "0s"`}},
		{"listen port too large", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"listen": "127.0.0.1:99999"}}`,
			[]string{`gateway.listen: "127.0.0.1:99999": port "99999" is not a number from 0 to 65535`}},
		{"listen port not a number", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"listen": "localhost:http"}}`,
			[]string{`gateway.listen: "localhost:http": port "http" is not a number from 0 to 65535`}},
		{"listen without port", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"listen": "nohost"}}`,
			[]string{`gateway.listen: "nohost" is not host:port (e.g. "127.0.0.1:8080")`}},
		{"listen bad host", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"listen": "no host:80"}}`,
			[]string{`gateway.listen: "no host:80": "no host" is not an IP address or host name`}},
		{"listen on every interface", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"listen": ":0"}}`, nil},
		{"allowed hosts", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"allowedHosts": ["ok.example", "*", "::1", "http://x", "x:80"]}}`,
			[]string{
				`gateway.allowedHosts[3]: "http://x" is not a host name or IP address (write it without scheme or port, e.g. "mcp.example.com"), or "*"`,
				`gateway.allowedHosts[4]: "x:80" is not a host name or IP address (write it without scheme or port, e.g. "mcp.example.com"), or "*"`,
			}},
		{"zero limits", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"maxConnections": 0, "sseReplayBytes": 0, "sessionReplayBytes": 0, "headerTimeout": "0s", "bodyReadTimeout": "0s", "idleTimeout": "0s", "replyWait": "0s", "inputWait": "0s"}}`,
			[]string{
				`gateway.bodyReadTimeout: must be greater than 0, not "0s"`,
				`gateway.headerTimeout: must be greater than 0, not "0s"`,
				`gateway.idleTimeout: must be greater than 0, not "0s"`,
				`gateway.inputWait: must be greater than 0, not "0s"`,
				`gateway.maxConnections: must be at least 1, not 0`,
				`gateway.replyWait: must be greater than 0, not "0s"`,
				`gateway.sessionReplayBytes: must be at least 1, not 0`,
				`gateway.sseReplayBytes: must be at least 1, not 0`,
			}},
		{"replay events zero disables", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"sseReplayEvents": 0}}`, nil},
		{"inheritEnv names", `{"mcpServers": {"a": {"command": "x", "inheritEnv": ["OK", "A=B", ""]}}}`,
			[]string{
				`mcpServers.a.inheritEnv[1]: "A=B" is not an environment variable name`,
				`mcpServers.a.inheritEnv[2]: "" is not an environment variable name`,
			}},
		{"critical type", `{"mcpServers": {"a": {"command": "x", "critical": "yes"}}}`,
			[]string{`mcpServers.a.critical: must be true or false`}},
		{"server limits", `{"mcpServers": {"a": {"command": "x", "initTimeout": "0s", "pingInterval": "-1s", "stdinTimeout": "0s", "maxProcesses": 0, "stderrBytesPerSec": 0}}}`,
			[]string{
				`mcpServers.a.initTimeout: must be greater than 0, not "0s"`,
				`mcpServers.a.maxProcesses: must be at least 1, not 0`,
				`mcpServers.a.pingInterval: must be "0" (off) or greater, not "-1s"`,
				`mcpServers.a.stderrBytesPerSec: must be at least 1, not 0`,
				`mcpServers.a.stdinTimeout: must be greater than 0, not "0s"`,
			}},
		{"ping off", `{"mcpServers": {"a": {"command": "x", "pingInterval": "0"}}}`, nil},
		{"processes zero", `{"mcpServers": {"a": {"command": "x", "processes": 0}}}`,
			[]string{`mcpServers.a.processes: must be from 1 to 64, not 0`}},
		{"processes negative", `{"mcpServers": {"a": {"command": "x", "processes": -2}}}`,
			[]string{`mcpServers.a.processes: must be from 1 to 64, not -2`}},
		{"processes over the bound", `{"mcpServers": {"a": {"command": "x", "processes": 65}}}`,
			[]string{`mcpServers.a.processes: must be from 1 to 64, not 65`}},
		{"processes not an integer", `{"mcpServers": {"a": {"command": "x", "processes": "2"}}}`,
			[]string{`mcpServers.a.processes: must be an integer`}},
		{"processes fraction", `{"mcpServers": {"a": {"command": "x", "processes": 1.5}}}`,
			[]string{`mcpServers.a.processes: must be an integer, not 1.5`}},
		{"processes in session mode", `{"mcpServers": {"a": {"command": "x", "isolation": "session", "processes": 2}}}`,
			[]string{`mcpServers.a.processes: 2 is only valid with "isolation": "shared" (a session-mode server has a process per session)`}},
		{"processes of a remote", `{"mcpServers": {"r": {"type": "http", "url": "https://h/mcp", "processes": 3}}}`,
			[]string{`mcpServers.r.processes: 3 is only valid for "stdio" servers (a remote's sessions each have an upstream session)`}},
		{"processes one anywhere", `{"mcpServers": {"a": {"command": "x", "isolation": "session", "processes": 1}, "r": {"type": "sse", "url": "https://h/sse", "processes": 1}}}`, nil},
		{"processes shared", `{"mcpServers": {"a": {"command": "x", "processes": 64}}}`, nil},
		{"prewarm over maxProcesses", `{"mcpServers": {"a": {"command": "x", "isolation": "session", "prewarm": 3, "maxProcesses": 2}}}`,
			[]string{`mcpServers.a.prewarm: must be at most maxProcesses (2), not 3`}},
		{"duration negative", `{"mcpServers": {"a": {"command": "x", "timeout": "-1m"}}}`,
			[]string{`mcpServers.a.timeout: must be greater than 0, not "-1m"`}},
		{"missing command", `{"mcpServers": {"a": {"args": ["x"]}}}`, []string{`mcpServers.a.command: required`}},
		{"empty command", `{"mcpServers": {"a": {"command": ""}}}`, []string{`mcpServers.a.command: required`}},
		{"bad type", `{"mcpServers": {"a": {"type": "ws", "command": "x"}}}`, []string{`mcpServers.a.type: "ws" is not one of "stdio", "http", "sse"`}},
		{"http without url", `{"mcpServers": {"r": {"type": "http", "headers": {"Authorization": "Bearer ${TOKEN:-x}"}}}}`,
			[]string{`mcpServers.r.url: required`}},
		{"sse with a bad url", `{"mcpServers": {"r": {"type": "sse", "url": "ftp://mcp.example/sse"}}}`,
			[]string{`mcpServers.r.url: "ftp://mcp.example/sse" is not an http:// or https:// URL`}},
		{"remote with a command", `{"mcpServers": {"r": {"type": "http", "url": "https://mcp.example/mcp", "command": "x"}}}`,
			[]string{`mcpServers.r.command: only used by "stdio" servers`}},
		{"stdio with url", `{"mcpServers": {"a": {"command": "x", "url": "http://h", "headers": {"A": "b"}}}}`, []string{
			`mcpServers.a.headers: only used by "http" and "sse" servers`,
			`mcpServers.a.url: only used by "http" and "sse" servers`,
		}},
		{"bad name", `{"mcpServers": {"my server/1": {"command": "x"}}}`,
			[]string{`mcpServers.my server/1: invalid server name "my server/1" (use only letters, digits, '.', '_' and '-': it appears in URLs)`}},
		{"bad isolation", `{"mcpServers": {"a": {"command": "x", "isolation": "process"}}}`,
			[]string{`mcpServers.a.isolation: "process" is not one of "shared", "session"`}},
		{"protocol", `{"mcpServers": {"a": {"command": "x", "protocol": "2026-07-28"}, "b": {"command": "x", "protocol": "legacy"},
		  "c": {"command": "x", "protocol": "sessions"}}}`, nil},
		{"bad protocol", `{"mcpServers": {"a": {"command": "x", "protocol": "2025-11-25"}}}`,
			[]string{`mcpServers.a.protocol: "2025-11-25" is not one of "auto", "2026-07-28", "sessions" (or its old name "legacy")`}},
		{"protocol per server type", `{"mcpServers": {"s": {"command": "x", "isolation": "session", "protocol": "legacy"},
		  "r": {"url": "https://mcp.example/mcp", "protocol": "2026-07-28"}, "a": {"url": "https://mcp.example/mcp", "protocol": "auto"},
		  "l": {"url": "https://mcp.example/mcp", "protocol": "legacy"},
		  "n": {"url": "https://mcp.example/mcp", "protocol": "sessions"},
		  "e": {"type": "sse", "url": "https://mcp.example/sse", "protocol": "legacy"},
		  "m": {"type": "sse", "url": "https://mcp.example/sse", "protocol": "2026-07-28"}}}`, []string{
			`mcpServers.e.protocol: "legacy" is only valid for "stdio" servers (the gateway runs no process for a remote one to translate for); use "auto"`,
			`mcpServers.l.protocol: "legacy" is only valid for "stdio" servers (the gateway runs no process for a remote one to translate for); use "auto"`,
			`mcpServers.m.protocol: "2026-07-28" is not valid for an "sse" server (the legacy transport has no 2026-07-28); use "auto"`,
			`mcpServers.n.protocol: "sessions" is only valid for "stdio" servers (the gateway runs no process for a remote one to translate for); use "auto"`,
		}},
		{"prewarm with shared", `{"mcpServers": {"a": {"command": "x", "prewarm": 2}}}`,
			[]string{`mcpServers.a.prewarm: only valid with "isolation": "session" (a shared server has one process)`}},
		{"prewarm zero with shared", `{"mcpServers": {"a": {"command": "x", "prewarm": 0}}}`, nil},
		{"roots type", `{"mcpServers": {"a": {"command": "x", "roots": "file:///"}}}`,
			[]string{`mcpServers.a.roots: must be an array of objects like {"uri": "file:///path"}`}},
		{"root not object", `{"mcpServers": {"a": {"command": "x", "roots": ["file:///"]}}}`,
			[]string{`mcpServers.a.roots[0]: must be an object`}},
		{"root uri", `{"mcpServers": {"a": {"command": "x", "roots": [{"name": "n"}, {"uri": "https://x"}]}}}`, []string{
			`mcpServers.a.roots[0].uri: required`,
			`mcpServers.a.roots[1].uri: "https://x" is not a file:// URI`,
		}},
		{"listen", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"listen": "8080"}}`,
			[]string{`gateway.listen: "8080" is not host:port (e.g. "127.0.0.1:8080")`}},
		{"origins", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"allowedOrigins": ["claude.ai", "https://claude.ai/x", "*"]}}`, []string{
			`gateway.allowedOrigins[0]: "claude.ai" is not an origin (write "scheme://host" or "scheme://host:port", or "*")`,
			`gateway.allowedOrigins[1]: "https://claude.ai/x" is not an origin (write "scheme://host" or "scheme://host:port", or "*")`,
		}},
		{"log level", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"logLevel": "verbose"}}`,
			[]string{`gateway.logLevel: "verbose" is not one of "debug", "info", "warn", "error"`}},
		{"stderr level", `{"mcpServers": {"a": {"command": "x", "stderrLevel": "warning"}}}`,
			[]string{`mcpServers.a.stderrLevel: "warning" is not one of "debug", "info", "warn", "error"`}},
		{"log format", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"logFormat": "logfmt"}}`,
			[]string{`gateway.logFormat: "logfmt" is not one of "text", "json"`}},
		{"log format type", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"logFormat": 1}}`,
			[]string{`gateway.logFormat: must be a string`}},
		{"limits", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"maxSessions": 0, "maxBodyBytes": -1, "sseReplayEvents": -1}}`, []string{
			`gateway.maxBodyBytes: must be at least 1, not -1`,
			`gateway.maxSessions: must be at least 1, not 0`,
			`gateway.sseReplayEvents: must be at least 0, not -1`,
		}},
		{"missing env var", `{"mcpServers": {"x": {"command": "gh", "env": {"TOKEN": "${GITHUB_TOKEN}"}}}}`,
			[]string{`mcpServers.x.env.TOKEN: environment variable "GITHUB_TOKEN" is not set`}},
		{"missing env vars everywhere", `{"mcpServers": {"x": {"command": "${A}", "args": ["${B}"], "cwd": "${C}",
		  "roots": [{"uri": "file://${D}"}]}}, "gateway": {"listen": "${E}:1"}}`, []string{
			`gateway.listen: environment variable "E" is not set`,
			`mcpServers.x.args[0]: environment variable "B" is not set`,
			`mcpServers.x.command: environment variable "A" is not set`,
			`mcpServers.x.cwd: environment variable "C" is not set`,
			`mcpServers.x.roots[0].uri: environment variable "D" is not set`,
		}},
		// Endpoints (gateway.endpoints) and the servers' keys for them.
		{"endpoints", `{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "prefix": ""}},
		  "gateway": {"endpoints": {"all": false, "ab": {"servers": ["a", "b"], "tools": {"allow": ["*"], "deny": ["rm[a-z]"]}},
		  "a.1": {"servers": ["a"], "separator": "-", "maxNameLength": 128, "snakeCase": true}, "x": null}}}`, nil},
		{"endpoints not an object", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": ["a"]}}`,
			[]string{`gateway.endpoints: must be an object of endpoints`}},
		{"endpoint not an object", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": {"e": ["a"], "f": false, "all": true}}}`, []string{
			`gateway.endpoints.all: must be an object, or false to turn the default endpoint off`,
			`gateway.endpoints.e: must be an object like {"servers": ["a", "b"]}`,
			`gateway.endpoints.f: must be an object like {"servers": ["a", "b"]}`,
		}},
		{"endpoint unknown key", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": {"e": {"servers": ["a"], "server": "a", "tools": {"allow": [], "block": []}}}}}`, []string{
			`gateway.endpoints.e.server: unknown key`,
			`gateway.endpoints.e.tools.block: unknown key`,
		}},
		{"endpoint key types", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": {"e": {"servers": "a", "separator": 1, "maxNameLength": "64", "snakeCase": 1, "prompts": ["*"], "resources": {"deny": "*"}}}}}`, []string{
			`gateway.endpoints.e.maxNameLength: must be an integer`,
			`gateway.endpoints.e.prompts: must be an object like {"allow": ["pattern"], "deny": ["pattern"]}`,
			`gateway.endpoints.e.resources.deny: must be an array of strings`,
			`gateway.endpoints.e.separator: must be a string`,
			`gateway.endpoints.e.servers: must be an array of strings`,
			`gateway.endpoints.e.snakeCase: must be true or false`,
		}},
		{"endpoint without servers", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": {"e": {}, "f": {"servers": []}}}}`, []string{
			`gateway.endpoints.e.servers: must list at least one server`,
			`gateway.endpoints.f.servers: must list at least one server`,
		}},
		{"endpoint all with no servers", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": {"all": {"servers": []}}}}`,
			[]string{`gateway.endpoints.all.servers: must list at least one server`}},
		{"endpoint unknown server", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": {"e": {"servers": ["a", "memroy"]}}}}`,
			[]string{`gateway.endpoints.e.servers[1]: unknown server "memroy" (not in mcpServers)`}},
		{"endpoint server twice", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": {"e": {"servers": ["a", "a"]}}}}`,
			[]string{`gateway.endpoints.e.servers[1]: server "a" is already listed at gateway.endpoints.e.servers[0]`}},
		{"endpoint name", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": {"my tools": {"servers": ["a"]}}}}`,
			[]string{`gateway.endpoints.my tools: invalid endpoint name "my tools" (use only letters, digits, '.', '_' and '-': it appears in URLs)`}},
		{"endpoint same prefix", `{"mcpServers": {"a": {"command": "x", "prefix": "p"}, "b": {"command": "x", "prefix": "p"}, "c": {"command": "x"}},
		  "gateway": {"endpoints": {"all": false, "e": {"servers": ["c", "a", "b"]}, "f": {"servers": ["a", "c"]}}}}`,
			[]string{`gateway.endpoints.e.servers[2]: servers "a" and "b" have the same prefix "p": their tool and prompt names would collide; give one of them another "prefix"`}},
		{"endpoint same prefix as a name", `{"mcpServers": {"a": {"command": "x", "prefix": "b"}, "b": {"command": "x"}}, "gateway": {"endpoints": {"all": false, "e": {"servers": ["a", "b"]}}}}`,
			[]string{`gateway.endpoints.e.servers[1]: servers "a" and "b" have the same prefix "b": their tool and prompt names would collide; give one of them another "prefix"`}},
		{"empty prefixes may share", `{"mcpServers": {"a": {"command": "x", "prefix": ""}, "b": {"command": "x", "prefix": ""}}}`, nil},
		{"default endpoint same prefix", `{"mcpServers": {"a": {"command": "x", "prefix": "b"}, "b": {"command": "x"}}}`,
			[]string{`gateway.endpoints.all: servers "a" and "b" have the same prefix "b": their tool and prompt names would collide; give one of them another "prefix" (the default endpoint "all" merges every server: set "gateway": {"endpoints": {"all": false}}, or list its servers, to serve them apart)`}},
		{"default endpoint off", `{"mcpServers": {"a": {"command": "x", "prefix": "b"}, "b": {"command": "x"}}, "gateway": {"endpoints": {"all": false}}}`, nil},
		{"endpoint separator", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": {"e": {"servers": ["a"], "separator": ""}, "f": {"servers": ["a"], "separator": "::"}, "g": {"servers": ["a"], "separator": "/"}}}}`, []string{
			`gateway.endpoints.e.separator: must not be empty (the default is "__")`,
			`gateway.endpoints.f.separator: "::" has characters not allowed in tool names (use letters, digits, '_', '-' or '.')`,
			`gateway.endpoints.g.separator: "/" has characters not allowed in tool names (use letters, digits, '_', '-' or '.')`,
		}},
		{"endpoint maxNameLength", `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"endpoints": {"e": {"servers": ["a"], "maxNameLength": 15}, "f": {"servers": ["a"], "maxNameLength": 129}, "g": {"servers": ["a"], "maxNameLength": 16}}}}`, []string{
			`gateway.endpoints.e.maxNameLength: must be from 16 to 128, not 15`,
			`gateway.endpoints.f.maxNameLength: must be from 16 to 128, not 129`,
		}},
		{"bad globs", `{"mcpServers": {"a": {"command": "x", "tools": {"allow": ["read_[", "ok_*"], "deny": [""]}, "resources": {"deny": ["file:///\\"]}}},
		  "gateway": {"endpoints": {"all": {"prompts": {"allow": ["[]a]", "[^a]"]}}}}}`, []string{
			`gateway.endpoints.all.prompts.allow[0]: "[]a]" is not a valid pattern (path.Match syntax: *, ?, [a-z], [^a-z], \* for a literal *)`,
			`mcpServers.a.resources.deny[0]: "file:///\\" is not a valid pattern (path.Match syntax: *, ?, [a-z], [^a-z], \* for a literal *)`,
			`mcpServers.a.tools.allow[0]: "read_[" is not a valid pattern (path.Match syntax: *, ?, [a-z], [^a-z], \* for a literal *)`,
			`mcpServers.a.tools.deny[0]: empty pattern (it matches nothing)`,
		}},
		{"prefix", `{"mcpServers": {"a": {"command": "x", "prefix": "my tools"}, "b": {"command": "x", "prefix": 3}}}`, []string{
			`mcpServers.a.prefix: "my tools" has characters not allowed in tool names (use letters, digits, '_', '-' or '.'; "" for none)`,
			`mcpServers.b.prefix: must be a string`,
		}},
		{"server filter keys", `{"mcpServers": {"a": {"command": "x", "tools": {"allow": "*"}, "prompts": {"only": []}, "resources": "*"}}}`, []string{
			`mcpServers.a.prompts.only: unknown key`,
			`mcpServers.a.resources: must be an object like {"allow": ["pattern"], "deny": ["pattern"]}`,
			`mcpServers.a.tools.allow: must be an array of strings`,
		}},
		{"keys and other strings are not expanded", `{"mcpServers": {"x": {"command": "x", "env": {"${K}": "v"}, "isolation": "${I:-shared}"}}}`,
			[]string{`mcpServers.x.isolation: "${I:-shared}" is not one of "shared", "session"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.file), nil)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if cfg != nil {
				t.Errorf("Parse returned a config with its error")
			}
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse error %v (%T), want Problems", err, err)
			}
			got := make([]string, len(ps))
			for i, p := range ps {
				got[i] = p.Error()
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if err.Error() != strings.Join(tt.want, "\n") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestParseReportsAllProblemsAtOnce(t *testing.T) {
	file := `{
	  "mcpServers": {
	    "memory": {"comand": "npx"},
	    "github": {"command": "gh", "timeout": "30"}
	  },
	  "gateway": {"maxSessions": "many"}
	}`
	_, err := Parse([]byte(file), nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse error %v, want Problems", err)
	}
	want := Problems{
		{"gateway.maxSessions", "must be an integer"},
		{"mcpServers.github.timeout", `"30" is not a duration (use e.g. "30s")`},
		{"mcpServers.memory.comand", "unknown key"},
		{"mcpServers.memory.command", "required"},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("problems = %q\nwant %q", ps, want)
	}
	// errors.As also finds a single Problem.
	var p Problem
	if !errors.As(err, &p) || p != want[0] {
		t.Errorf("errors.As(Problem) = %v", p)
	}
}
