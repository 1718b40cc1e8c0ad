// resume_client.mjs has one official TypeScript SDK client call server-everything's long-running
// operation through a gateway whose proxy breaks the call's SSE stream after its first progress
// notification: the SDK resumes the stream (a GET with Last-Event-ID, which may land on another
// replica) and must get the rest of the progress and the result, each exactly once.
//
// Usage: node resume_client.mjs --url http://127.0.0.1:PORT/servers/NAME/mcp [--steps 4]
//
// It prints one JSON summary on stdout and exits 0 only if every check passed. It must stand next
// to the node_modules it imports (the Go test copies it into .cache/peers).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: { url: { type: "string" }, steps: { type: "string", default: "4" } },
});
if (!opts.url) {
  console.error("usage: resume_client.mjs --url URL [--steps N]");
  process.exit(2);
}
const steps = Number.parseInt(opts.steps, 10);
const LRO = "trigger-long-running-operation";

const report = { progress: [], disconnects: 0, result: "", errors: [] };
const fail = (msg) => report.errors.push(msg);

const client = new Client({ name: "mcpgate-e2e-resume", version: "1.0.0" });
let closing = false;
client.onerror = (err) => {
  const msg = err?.message ?? String(err);
  // The break the test makes: the SDK reports it, then resumes.
  if (msg.startsWith("SSE stream disconnected")) report.disconnects++;
  else if (!closing) fail(`client error: ${msg}`);
};
// Resume at once: the test breaks the stream, it does not need a backoff.
const transport = new StreamableHTTPClientTransport(new URL(opts.url), {
  reconnectionOptions: { initialReconnectionDelay: 50, maxReconnectionDelay: 500, reconnectionDelayGrowFactor: 2, maxRetries: 5 },
});
try {
  await client.connect(transport);
  const r = await client.callTool({ name: LRO, arguments: { duration: 1.5, steps } }, undefined, {
    onprogress: (p) => report.progress.push({ progress: p.progress, total: p.total }),
    resetTimeoutOnProgress: true,
  });
  report.result = (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  if (r.isError || !report.result.includes(`Steps: ${steps}`)) fail(`${LRO}: ${JSON.stringify(r)}`);
  const want = Array.from({ length: steps }, (_, k) => ({ progress: k + 1, total: steps }));
  if (JSON.stringify(report.progress) !== JSON.stringify(want)) {
    fail(`progress: want ${JSON.stringify(want)}, got ${JSON.stringify(report.progress)}`);
  }
  // A call after the resume: the session goes on.
  const e = await client.callTool({ name: "echo", arguments: { message: "after the resume" } });
  if (e.isError || !JSON.stringify(e.content).includes("after the resume")) fail(`echo after the resume: ${JSON.stringify(e)}`);
  closing = true;
  await transport.terminateSession();
} catch (err) {
  fail(`${err?.name ?? "Error"}: ${err?.message ?? err}`);
} finally {
  closing = true;
  await client.close().catch(() => {});
}
console.log(JSON.stringify({ ok: report.errors.length === 0, ...report }));
process.exit(report.errors.length === 0 ? 0 : 1);
