// oauth_example_server.mjs runs the official TypeScript SDK's example MCP server with OAuth, as
// shipped (@modelcontextprotocol/sdk, examples/server/simpleStreamableHttp.js --oauth
// --oauth-strict): a Streamable HTTP server at http://localhost:MCP_PORT/mcp behind the SDK's own
// requireBearerAuth (tokens checked by introspection, strict audience), with the SDK's demo
// authorization server on MCP_AUTH_PORT. It is the reference resource server oauth_client.mjs is
// proven against (TestOAuthClientBaseline), as the gateway is then judged by the same script.
//
// Usage: MCP_PORT=N MCP_AUTH_PORT=M node oauth_example_server.mjs
//
// The only change: both express apps listen on 127.0.0.1 instead of every interface. It must
// stand next to the node_modules it imports.
import express from "express";

let listens = 0;
const listen = express.application.listen;
express.application.listen = function (port, ...rest) {
  listens++;
  return listen.call(this, port, "127.0.0.1", ...rest);
};
process.argv.push("--oauth", "--oauth-strict");
await import("@modelcontextprotocol/sdk/examples/server/simpleStreamableHttp.js");
if (listens !== 2) {
  // Both apps listen while the module loads; otherwise the SDK uses another copy of express than
  // this script (e2e/peers/package.json pins the one they share).
  console.error(`oauth_example_server: ${listens} of the 2 express apps listen through the loopback patch`);
  process.exit(1);
}
