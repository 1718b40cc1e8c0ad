// policy_client.mjs lists a server's tools and calls some of them with the official TypeScript
// SDK client, as one principal (its --header), and prints what it saw as one JSON object:
// {"tools": [names, sorted, every page], "calls": {NAME: {"text": ...} or {"error": {code, message}}}}.
// It checks nothing itself: the Go test judges the policy from what this client saw.
//
// Usage: node policy_client.mjs --url URL [--transport streamable|sse] [--header "Name: value"]
//          [--call NAME=ARGUMENTS_JSON ...]
//
// It must stand next to the node_modules it imports (the Go test copies it into .cache/peers).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    url: { type: "string" },
    transport: { type: "string", default: "streamable" },
    header: { type: "string", multiple: true, default: [] },
    call: { type: "string", multiple: true, default: [] },
  },
});
if (!opts.url) {
  console.error("usage: policy_client.mjs --url URL [--transport streamable|sse] [--header 'Name: value'] [--call NAME=JSON ...]");
  process.exit(2);
}
const headers = {};
for (const h of opts.header) {
  const i = h.indexOf(":");
  headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
}
const url = new URL(opts.url);
// requestInit's headers go on the SSE stream's GET too (the SDK merges them).
const transport = opts.transport === "sse"
  ? new SSEClientTransport(url, { requestInit: { headers } })
  : new StreamableHTTPClientTransport(url, { requestInit: { headers } });
const client = new Client({ name: "policy-client", version: "1.0.0" });
const out = { tools: [], calls: {} };
try {
  await client.connect(transport);
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    out.tools.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
  } while (cursor);
  out.tools.sort();
  for (const c of opts.call) {
    const i = c.indexOf("=");
    const name = i < 0 ? c : c.slice(0, i);
    const args = i < 0 ? {} : JSON.parse(c.slice(i + 1));
    try {
      const res = await client.callTool({ name, arguments: args });
      out.calls[name] = { text: (res.content ?? []).map((p) => p.text ?? "").join(""), isError: !!res.isError };
    } catch (e) {
      out.calls[name] = { error: { code: e.code ?? null, message: String(e.message ?? e) } };
    }
  }
} catch (e) {
  out.fatal = String(e?.stack ?? e);
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(out));
process.exit(out.fatal ? 1 : 0);
