package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// claudeDesktop is a claude_desktop_config.json as Claude Desktop writes it,
// with settings of its own beside mcpServers.
const claudeDesktop = `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/Users/username/Desktop",
        "/Users/username/Downloads"
      ]
    },
    "github": {
      "command": "docker",
      "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
      "env": {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "<YOUR_TOKEN>"
      }
    }
  },
  "preferences": {"menuBarEnabled": false, "quickEntryShortcut": "off", "mcpServers": 7}
}`

// claudeCode is the shape of ~/.claude.json and .mcp.json: "type" per server
// and many unrelated top-level keys.
const claudeCode = `{
  "numStartups": 12,
  "projects": {"/home/u/src": {"allowedTools": [], "mcpServers": {}}},
  "mcpServers": {
    "memory": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory"],
      "env": {}
    }
  }
}`

func TestParseClaudeFiles(t *testing.T) {
	g := Defaults()
	stdio := func(name, command string, args []string, env map[string]string) *Server {
		s := g.NewServer(name)
		s.Command, s.Args, s.Env = command, args, env
		return s
	}
	tests := []struct {
		name string
		file string
		want map[string]*Server
	}{
		{"claude desktop", claudeDesktop, map[string]*Server{
			"filesystem": stdio("filesystem", "npx", []string{"-y", "@modelcontextprotocol/server-filesystem",
				"/Users/username/Desktop", "/Users/username/Downloads"}, nil),
			"github": stdio("github", "docker", []string{"run", "-i", "--rm", "-e",
				"GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"},
				map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "<YOUR_TOKEN>"}),
		}},
		{"claude code", claudeCode, map[string]*Server{
			"memory": stdio("memory", "npx", []string{"-y", "@modelcontextprotocol/server-memory"}, map[string]string{}),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.file), nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(cfg.Gateway, Defaults()) {
				t.Errorf("Gateway = %+v, want defaults", cfg.Gateway)
			}
			if !reflect.DeepEqual(cfg.Servers, tt.want) {
				t.Errorf("Servers:\n got %s\nwant %s", dump(cfg.Servers), dump(tt.want))
			}
		})
	}
}

func dump(servers map[string]*Server) string {
	var b strings.Builder
	for _, name := range (&Config{Servers: servers}).Names() {
		fmt.Fprintf(&b, "\n  %+v", *servers[name])
	}
	return b.String()
}

func TestParseKeysAreNotExpanded(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers": {"x": {"command": "x", "env": {"${K}": "${V}"}}}}`),
		fakeEnv(map[string]string{"K": "key", "V": "value"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Servers["x"].Env, map[string]string{"${K}": "value"}; !reflect.DeepEqual(got, want) {
		t.Errorf("env = %q, want %q", got, want)
	}
}

func TestParseSetsEverything(t *testing.T) {
	file := `{"gateway": {
	    "listen": "${HOST:-0.0.0.0}:9000",
	    "allowedOrigins": ["https://claude.ai"],
	    "sessionIdleTimeout": "1h",
	    "sessionSweepInterval": "1m",
	    "keepAliveInterval": "20s",
	    "drainTimeout": "3s",
	    "requestTimeout": "2m",
	    "maxSessions": 5,
	    "maxBodyBytes": 1024,
	    "sseReplayEvents": 0,
	    "maxLineBytes": 2048,
	    "logLevel": "debug",
	    "logFormat": "json",
	    "sseReplayBytes": 100,
	    "sessionReplayBytes": 200,
	    "headerTimeout": "1s",
	    "bodyReadTimeout": "2s",
	    "replyWait": "25ms",
	    "inputWait": "1m",
	    "idleTimeout": "3s",
	    "maxConnections": 7,
	    "allowedHosts": ["mcp.example.com", "10.0.0.1", "[::2]"],
	    "metrics": false
	  },
	  "mcpServers": {
	    "inherits": {"command": "a"},
	    "all": {
	      "type": "stdio",
	      "command": "${BIN}/srv",
	      "args": ["--token", "${TOKEN}", "$literal"],
	      "env": {"TOKEN": "${TOKEN}", "MODE": "${MODE:-fast}"},
	      "cwd": "${HOME}",
	      "isolation": "session",
	      "timeout": "45s",
	      "maxInFlight": 3,
	      "prewarm": 2,
	      "roots": [{"uri": "file://${HOME}/src", "name": "src"}, {"uri": "file:///tmp"}],
	      "maxLineBytes": 4096,
	      "inheritEnv": ["GITHUB_TOKEN"],
	      "critical": true,
	      "initTimeout": "4m",
	      "pingInterval": "10s",
	      "stdinTimeout": "5s",
	      "maxProcesses": 9,
	      "stderrBytesPerSec": 100,
	      "stderrLevel": "debug",
	      "protocol": "auto",
	      "prefix": "",
	      "tools": {"allow": ["read_*", "list_*"], "deny": ["*_secret"]},
	      "prompts": {"deny": ["*"]},
	      "resources": {"allow": ["file:///home/*"]}
	    }
	  }}`
	env := fakeEnv(map[string]string{"BIN": "/opt/bin", "TOKEN": "t0k", "HOME": "/home/u"})
	cfg, err := Parse([]byte(file), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	wantGateway := Gateway{
		Listen:               "0.0.0.0:9000",
		AllowedOrigins:       []string{"https://claude.ai"},
		SessionIdleTimeout:   time.Hour,
		SessionSweepInterval: time.Minute,
		KeepAliveInterval:    20 * time.Second,
		DrainTimeout:         3 * time.Second,
		RequestTimeout:       2 * time.Minute,
		MaxSessions:          5,
		MaxBodyBytes:         1024,
		SSEReplayEvents:      0,
		MaxLineBytes:         2048,
		LogLevel:             "debug",
		LogFormat:            "json",
		SSEReplayBytes:       100,
		SessionReplayBytes:   200,
		HeaderTimeout:        time.Second,
		BodyReadTimeout:      2 * time.Second,
		ReplyWait:            25 * time.Millisecond,
		InputWait:            time.Minute,
		IdleTimeout:          3 * time.Second,
		MaxConnections:       7,
		AllowedHosts:         []string{"mcp.example.com", "10.0.0.1", "[::2]"},
	}
	if !reflect.DeepEqual(cfg.Gateway, wantGateway) {
		t.Errorf("Gateway =\n %+v\nwant\n %+v", cfg.Gateway, wantGateway)
	}
	// Server defaults come from the gateway block, wherever it is written.
	wantInherits := &Server{Name: "inherits", Prefix: "inherits", Type: "stdio", Command: "a", Isolation: IsolationShared,
		Timeout: 2 * time.Minute, MaxLineBytes: 2048, InitTimeout: DefaultInitTimeout,
		StdinTimeout: DefaultStdinTimeout, MaxProcesses: DefaultMaxProcesses, Processes: 1, StderrBytesPerSec: DefaultStderrBytesPerSec,
		StderrLevel: "info", Protocol: ProtocolAuto}
	if got := cfg.Servers["inherits"]; !reflect.DeepEqual(got, wantInherits) {
		t.Errorf("inherits =\n %+v\nwant\n %+v", got, wantInherits)
	}
	wantAll := &Server{
		Name:              "all",
		Type:              "stdio",
		Command:           "/opt/bin/srv",
		Args:              []string{"--token", "t0k", "$literal"},
		Env:               map[string]string{"TOKEN": "t0k", "MODE": "fast"},
		Cwd:               "/home/u",
		Isolation:         IsolationSession,
		Timeout:           45 * time.Second,
		MaxInFlight:       3,
		Prewarm:           2,
		Roots:             []Root{{URI: "file:///home/u/src", Name: "src"}, {URI: "file:///tmp"}},
		MaxLineBytes:      4096,
		InheritEnv:        []string{"GITHUB_TOKEN"},
		Critical:          true,
		InitTimeout:       4 * time.Minute,
		PingInterval:      10 * time.Second,
		StdinTimeout:      5 * time.Second,
		MaxProcesses:      9,
		Processes:         1,
		StderrBytesPerSec: 100,
		StderrLevel:       "debug",
		Protocol:          ProtocolAuto,
		Prefix:            "",
		Tools:             Globs{Allow: []string{"read_*", "list_*"}, Deny: []string{"*_secret"}},
		Prompts:           Globs{Deny: []string{"*"}},
		Resources:         Globs{Allow: []string{"file:///home/*"}},
	}
	if got := cfg.Servers["all"]; !reflect.DeepEqual(got, wantAll) {
		t.Errorf("all =\n %+v\nwant\n %+v", got, wantAll)
	}
	if got, want := cfg.Names(), []string{"all", "inherits"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
}

func TestParseNullMeansDefault(t *testing.T) {
	cfg, err := Parse([]byte(`{"gateway": {"listen": null, "maxSessions": null},
		"mcpServers": {"a": {"command": "x", "args": null, "timeout": null}}}`), nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if cfg.Gateway.Listen != "127.0.0.1:8080" || cfg.Gateway.MaxSessions != 10000 {
		t.Errorf("gateway = %+v, want defaults", cfg.Gateway)
	}
	if s := cfg.Servers["a"]; s.Args != nil || s.Timeout != 5*time.Minute {
		t.Errorf("server = %+v, want defaults", s)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPGATE_TEST_CMD", "/bin/cat")

	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"mcpServers": {"cat": {"command": "${MCPGATE_TEST_CMD}"}}}`), 0o600)
	cfg, err := Load(good)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := cfg.Servers["cat"].Command; got != "/bin/cat" {
		t.Errorf("command = %q, want the environment's /bin/cat", got)
	}

	missing := filepath.Join(dir, "missing.json")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want a not-exist error naming the file", err)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"mcpServers": {"x": {}}}`), 0o600)
	var ps Problems
	if _, err := Load(bad); !errors.As(err, &ps) || len(ps) != 1 {
		t.Errorf("Load(bad) = %v, want one problem", err)
	}
}

func TestParseByteOrderMark(t *testing.T) {
	if _, err := Parse([]byte("\xef\xbb\xbf"+`{"mcpServers": {"a": {"command": "x"}}}`), nil); err != nil {
		t.Errorf("Parse with BOM: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		claudeDesktop, claudeCode, ``, `{}`, `null`, `{"mcpServers": {"a": {"command": "${X:-y}"}}}`,
		`{"mcpServers": {"r": {"type": "http", "url": "${U}"}}, "gateway": {"drainTimeout": "1s"}}`,
		`{"mcpServers": {"a": {"command": "x", "roots": [{"uri": "file:///"}], "env": {"A": "${B}"}}}}`,
		`{"mcpServers": {"a": {"command": "x", "prefix": "", "tools": {"deny": ["x*"]}}}, "gateway": {"endpoints": {"all": false, "e": {"servers": ["a"], "separator": "_"}}}}`,
		`{"mcpServers": {"a": {"command": "x"}}, "gateway": {"auth": {"publicUrl": "https://gw", "server": {"users": [{"name": "me", "passwordHash": "${X}"}], "redirectUris": ["https://*.a.b:*/cb"], "scopes": ["mcp"], "accessTokenTtl": "1m", "signInCode": false}}}}`,
		`{"mcpServers": {"a": {"command": "x", "auth": {"scopes": ["s"]}}, "b": {"command": "y", "auth": false}}, "gateway": {"auth": {"oauth": {"issuers": [{"issuer": "https://as", "algorithms": ["ES256"], "introspection": {"url": "https://as/i", "clientId": "c", "clientSecret": "${X}"}}], "scopes": ["mcp"]}, "apiKeys": [{"name": "k", "keyEnv": "X", "servers": ["a"]}], "publicUrl": "https://gw", "required": false}}}`,
	} {
		f.Add([]byte(seed))
	}
	for _, file := range []string{"../../examples/quickstart.json", "../../examples/full.json", "../../examples/endpoints.json", "../../examples/auth.json",
		"testdata/clients/cline/cline_mcp_settings.json", "testdata/clients/roo/mcp_settings.json", "testdata/clients/cursor/.cursor/mcp.json",
		"testdata/clients/windsurf/mcp_config.json", "testdata/clients/vscode/.vscode/mcp.json", "testdata/clients/claude/.claude.json"} {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	env := fakeEnv(map[string]string{"X": "x", "U": "https://h", "EMPTY": ""})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, env)
		if err != nil {
			var ps Problems
			if !errors.As(err, &ps) || len(ps) == 0 || cfg != nil {
				t.Fatalf("Parse error = %#v, config %v; want non-empty Problems and no config", err, cfg)
			}
			return
		}
		if len(cfg.Servers) == 0 {
			t.Fatal("Parse succeeded with no servers")
		}
		for name, s := range cfg.Servers {
			if s.Name != name || (s.Command == "" && !s.remote()) {
				t.Fatalf("server %q: %+v has no command and is not remote", name, s)
			}
			if s.Processes < 1 || s.Processes > MaxPoolProcesses || (s.Processes > 1 && (s.Isolation != IsolationShared || s.Type != TypeStdio)) {
				t.Fatalf("server %q: processes %d accepted (isolation %q, type %q)", name, s.Processes, s.Isolation, s.Type)
			}
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
	})
}
