// Package e2e holds mcpgate's end-to-end tests. They build the real gateway binary
// (./cmd/mcpgate), run it as a child process with a generated config, and drive it with
// software nobody on this team wrote: the official MCP conformance suite, the TypeScript SDK
// client, and the reference MCP servers. The peers are pinned and installed under .cache/ by
// scripts/peers.sh (`make peers`); see e2e/README.md.
//
// The package has no non-test code; this file exists for the package comment.
package e2e
