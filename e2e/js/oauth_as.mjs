// oauth_as.mjs runs the official TypeScript SDK's demo OAuth 2.1 authorization server
// (@modelcontextprotocol/sdk, examples/server/demoInMemoryOAuthProvider.js: setupAuthServer) on a
// loopback port, as the SDK's own example server runs it (simpleStreamableHttp.js --oauth):
// mcpAuthRouter with RFC 8414 metadata, dynamic client registration (RFC 7591), authorization
// with PKCE, the token endpoint, and /introspect (RFC 7662). The demo approves every authorization
// at once (its authorize step redirects with a code, no login page), which is what an automated
// client needs. Nothing of the SDK is copied: it is imported and run as shipped.
//
// Usage: node oauth_as.mjs [--port N] [--resource URL]
//
//   --port      the port to listen on (127.0.0.1 only); default: a free one
//   --resource  the MCP server URL (the gateway's /servers/NAME/mcp) the server issues tokens for,
//               with the demo's strict resource checking: a code requested for any other resource
//               (or none) is refused at the token endpoint. Without it, any resource is accepted
//               and becomes the token's audience ("aud" of the introspection response).
//
// Once listening it prints one JSON line on stdout, the authorization server metadata the demo
// returns (issuer, authorization_endpoint, token_endpoint, registration_endpoint,
// introspection_endpoint, ...) plus "resource" and "strict", and runs until it is killed. Its own
// log lines go to stderr. It must stand next to the node_modules it imports.
import net from "node:net";
import { parseArgs } from "node:util";
import express from "express";
import { setupAuthServer } from "@modelcontextprotocol/sdk/examples/server/demoInMemoryOAuthProvider.js";

const { values: opts } = parseArgs({
  options: {
    port: { type: "string", default: "0" },
    resource: { type: "string" },
  },
});

const HOST = "127.0.0.1";

// stdout carries exactly one JSON line; the demo's "listening" message goes to stderr.
console.log = (...args) => console.error(...args);

// freePort returns a loopback port that was free a moment ago.
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, HOST, () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

let port = Number.parseInt(opts.port, 10);
if (!Number.isInteger(port) || port < 0) {
  console.error(`oauth_as: bad --port ${opts.port}`);
  process.exit(2);
}
if (port === 0) port = await freePort();

// setupAuthServer calls app.listen(port, callback), which would listen on every interface. The
// tests keep all traffic on loopback, so the listen of express apps is narrowed to 127.0.0.1,
// and the server it returns is kept to learn when it listens.
let patched = false;
const listening = new Promise((resolve, reject) => {
  const listen = express.application.listen;
  express.application.listen = function (p, ...rest) {
    patched = true;
    const server = listen.call(this, p, HOST, ...rest);
    server.once("listening", () => resolve(server));
    server.once("error", reject);
    return server;
  };
});

// The issuer is the loopback URL; the SDK allows http for 127.0.0.1.
const authServerUrl = new URL(`http://${HOST}:${port}`);
const metadata = setupAuthServer({
  authServerUrl,
  mcpServerUrl: opts.resource ? new URL(opts.resource) : new URL(`http://${HOST}:${port}/mcp`),
  strictResource: Boolean(opts.resource),
});
if (!patched) {
  // setupAuthServer listens synchronously; if it did not go through the patch, the SDK uses
  // another copy of express than this script (e2e/peers/package.json pins the one they share).
  console.error("oauth_as: the SDK's express is not the one this script imports; refusing to listen beyond loopback");
  process.exit(1);
}

try {
  await listening;
} catch (err) {
  console.error(`oauth_as: listening on ${HOST}:${port}: ${err?.message ?? err}`);
  process.exit(1);
}
process.stdout.write(
  JSON.stringify({ ...metadata, resource: opts.resource ?? null, strict: Boolean(opts.resource) }) + "\n",
);

// Exit at once on a signal: the in-memory state is meant to die with the process.
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
