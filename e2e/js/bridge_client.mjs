// bridge_client.mjs runs the official TypeScript SDK Client over stdio against `mcpgate stdio`,
// which forwards to a remote MCP server (another mcpgate, or server-everything itself), and checks
// what the reference server-everything answers: its tool list, an echo, and a long-running
// operation's progress notifications.
//
// Usage: node bridge_client.mjs --mcpgate PATH --url URL [--transport auto|http|sse]
//
// It prints one JSON summary on stdout and exits 0 only if every check passed. It must stand next
// to the node_modules it imports (scripts/peers.sh and the Go test copy it into .cache/peers).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    mcpgate: { type: "string" },
    url: { type: "string" },
    transport: { type: "string", default: "auto" },
  },
});
if (!opts.mcpgate || !opts.url) {
  console.error("usage: bridge_client.mjs --mcpgate PATH --url URL [--transport auto|http|sse]");
  process.exit(2);
}

const LRO = "trigger-long-running-operation";
const STEPS = 4;

function textOf(result) {
  return (result.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

const report = { ok: false, tools: 0, echo: false, steps: STEPS, progress: [], closeMs: -1, errors: [] };
const fail = (msg) => report.errors.push(msg);

const client = new Client({ name: "mcpgate-bridge-e2e", version: "1.0.0" });
// The SDK handles a response synchronously but a notification a microtask later, so when the
// final progress notification and the reply arrive in one read from the pipe (the bridge writes
// what is queued in one go), the progress reaches a handler already removed ("unknown token").
// It can happen with any stdio server; accept exactly that: the last step, reported late.
const lateProgress = [];
client.onerror = (err) => {
  const m = /progress notification for an unknown token: (.*)$/.exec(err?.message ?? "");
  if (m) lateProgress.push(JSON.parse(m[1]).params);
  else fail(`client error: ${err?.message ?? err}`);
};
const transport = new StdioClientTransport({
  command: opts.mcpgate,
  args: ["stdio", "--url", opts.url, "--transport", opts.transport, "--log-level", "debug"],
  stderr: "inherit", // mcpgate's logs, next to this script's own stderr
});

try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  report.tools = tools.length;
  const names = tools.map((t) => t.name);
  for (const name of ["echo", LRO]) if (!names.includes(name)) fail(`tools/list has no "${name}" (got ${names.join(", ")})`);

  const message = `bridge-${randomUUID()}`;
  const echo = await client.callTool({ name: "echo", arguments: { message } });
  if (echo.isError || !textOf(echo).includes(message)) fail(`echo: got ${JSON.stringify(echo)}`);
  else report.echo = true;

  const lro = await client.callTool({ name: LRO, arguments: { duration: 0.4, steps: STEPS } }, undefined, {
    onprogress: (p) => report.progress.push({ progress: p.progress, total: p.total }),
  });
  if (lro.isError || !textOf(lro).includes(`Steps: ${STEPS}`)) fail(`${LRO}: got ${JSON.stringify(lro)}`);
  if (lateProgress.length === 1 && lateProgress[0].progress === STEPS && lateProgress[0].total === STEPS &&
      report.progress.length === STEPS - 1) {
    report.progress.push({ progress: STEPS, total: STEPS });
    report.lateFinalProgress = true;
  } else if (lateProgress.length > 0) {
    fail(`progress for an unknown token: ${JSON.stringify(lateProgress)}`);
  }
  const want = Array.from({ length: STEPS }, (_, k) => ({ progress: k + 1, total: STEPS }));
  if (JSON.stringify(report.progress) !== JSON.stringify(want)) {
    fail(`progress: want ${JSON.stringify(want)}, got ${JSON.stringify(report.progress)}`);
  }
} catch (err) {
  fail(`${err?.name ?? "Error"}: ${err?.message ?? err}`);
} finally {
  // close() ends mcpgate's stdin; the bridge must exit on its own, before the SDK's SIGTERM.
  const start = Date.now();
  await client.close().catch((err) => fail(`close: ${err?.message ?? err}`));
  report.closeMs = Date.now() - start;
}
report.ok = report.errors.length === 0;
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(report.ok ? 0 : 1);
