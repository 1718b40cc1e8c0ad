// Command mcpgate is the MCP gateway's command line: it parses flags, loads
// and validates the config (internal/config), handles SIGINT and SIGTERM,
// and hands over to internal/gateway. It holds no gateway logic.
//
//	mcpgate serve --config FILE [--listen ADDR] [--log-level LEVEL]
//	mcpgate serve [--listen ADDR] [--log-level LEVEL] -- COMMAND [ARGS...]
//	mcpgate validate --config FILE
//	mcpgate passwd
//	mcpgate version
//
// Exit status: 0 on success, 1 when the config has problems or the gateway
// fails, 2 on a usage error.
package main
