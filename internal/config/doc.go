// Package config owns mcpgate's configuration file: its schema, strict
// decoding, defaults and validation. It is pure data: nothing here starts a
// process, opens a socket or checks that a command exists.
//
// The file is JSON. Its top-level "mcpServers" object is the one Claude
// Desktop and Claude Code write, so an existing file works unchanged; so do
// the files of Cline, Roo, Cursor, Windsurf, VS Code (top-level "servers")
// and Claude Code's ~/.claude.json ("projects"), told apart by content
// (formats.go). Every other top-level key except "gateway" (mcpgate's own
// settings) is ignored.
//
// Decoding is strict and exhaustive: unknown keys, duplicate keys, wrong
// types, bad values and unset environment variables are all collected, each
// as a [Problem] naming its key path (for example
// "mcpServers.memory.comand: unknown key"), and returned together as
// [Problems] so that a user fixes a file in one pass. Parse never returns a
// partially valid Config.
//
// "gateway.endpoints" defines endpoints merging several servers; unless it
// sets "all" to false (or defines it), Parse adds the default endpoint
// "all" with every server. A Config built in code has only the endpoints
// it sets.
//
// String values that name things to run or reach (command, args, env values,
// cwd, url, header values, root URIs, gateway.listen, and in gateway.auth
// the URLs, audiences, introspection client credentials and key files)
// expand ${VAR} and ${VAR:-default} from the environment; keys are never
// expanded.
//
// Besides the config, Parse reads each server's "envFile" (envfile.go)
// and "gateway.secretsFile": the per-principal secrets that servers'
// "principalHeaders" templates read (principal_headers.go). Their values
// are never formatted: not in a Problem, an error or a String.
//
// Callers: cmd/mcpgate loads and validates a file before anything starts;
// internal/gateway reads the resulting *Config. A Config is not safe for
// concurrent mutation; treat it as read-only once the gateway is running.
package config
