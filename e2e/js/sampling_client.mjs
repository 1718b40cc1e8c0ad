// sampling_client.mjs has N official TypeScript SDK clients, each answering sampling requests
// with a text of its own, call server-everything's trigger-sampling-request at once: the server
// asks its client during the call, and the client's answer (a POST of its own, which behind a
// round-robin proxy lands on any replica) must reach the server that asked, so that each call's
// result holds its own client's text.
//
// Usage: node sampling_client.mjs --url http://127.0.0.1:PORT/servers/NAME/mcp [--clients 4]
//
// It prints one JSON summary on stdout and exits 0 only if every check passed. It must stand next
// to the node_modules it imports (the Go test copies it into .cache/peers).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: { url: { type: "string" }, clients: { type: "string", default: "4" } },
});
if (!opts.url) {
  console.error("usage: sampling_client.mjs --url URL [--clients N]");
  process.exit(2);
}
const clientCount = Number.parseInt(opts.clients, 10);

async function runClient(i) {
  const report = { client: i, sampled: 0, ok: false, errors: [] };
  const fail = (msg) => report.errors.push(msg);
  const mine = `sampled-by-${i}-${randomUUID()}`;
  const client = new Client({ name: `mcpgate-sampling-${i}`, version: "1.0.0" }, { capabilities: { sampling: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, async () => {
    report.sampled++;
    return { role: "assistant", content: { type: "text", text: mine }, model: `model-${i}`, stopReason: "endTurn" };
  });
  let closing = false;
  client.onerror = (err) => {
    if (!closing) fail(`client error: ${err?.message ?? err}`);
  };
  const transport = new StreamableHTTPClientTransport(new URL(opts.url));
  try {
    await client.connect(transport);
    // server-everything registers this tool when notifications/initialized reaches it. Behind
    // replicas the notification may reach it after the first call does (a replica answers 202
    // once the notification is queued for the remote, and the call goes through another one):
    // wait for the tool to be listed, as a client told tools/list_changed would.
    const deadline = Date.now() + 10000;
    while (!(await client.listTools()).tools.some((t) => t.name === "trigger-sampling-request")) {
      if (Date.now() > deadline) throw new Error("trigger-sampling-request never listed");
      await new Promise((r) => setTimeout(r, 50));
    }
    for (let round = 0; round < 3; round++) {
      const r = await client.callTool({ name: "trigger-sampling-request", arguments: { prompt: `round ${round}` } });
      const text = (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
      if (r.isError || !text.includes(mine)) fail(`round ${round}: want the result to hold ${mine}, got ${JSON.stringify(text)}`);
    }
    if (report.sampled !== 3) fail(`${report.sampled} sampling requests, want 3`);
    report.ok = report.errors.length === 0;
    closing = true;
    await transport.terminateSession();
  } catch (err) {
    fail(`${err?.name ?? "Error"}: ${err?.message ?? err}`);
  } finally {
    closing = true;
    await client.close().catch(() => {});
  }
  return report;
}

const results = await Promise.all(Array.from({ length: clientCount }, (_, i) => runClient(i)));
const failed = results.filter((r) => r.errors.length > 0).length;
console.log(JSON.stringify({ ok: failed === 0 && results.length === clientCount, clients: clientCount, failed, results }));
process.exit(failed === 0 ? 0 : 1);
