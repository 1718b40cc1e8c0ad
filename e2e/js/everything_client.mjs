// everything_client.mjs drives the reference server-everything through one MCP endpoint with N
// concurrent clients of the official TypeScript SDK, and checks that every reply and every
// progress notification reached the client it belongs to.
//
// Usage: node everything_client.mjs --url http://127.0.0.1:PORT/servers/everything/mcp [--clients 10]
//        [--transport streamable|sse]   (sse: the legacy 2024-11-05 SSEClientTransport)
//        [--header "Name: value"]...    (sent on every request, as clients with static headers do:
//                                        an API key)
//
// It prints one JSON summary on stdout and exits 0 only if every check passed. It must stand next
// to the node_modules it imports (scripts/peers.sh and the Go test copy it into .cache/peers).
//
// Why these calls: every SDK client numbers its requests from 0, so all N clients use the same
// JSON-RPC ids and the same progress tokens at the same time. A gateway that routes by id alone,
// or broadcasts notifications, hands one client another's echo, sum or progress; each client
// therefore uses its own message, its own numbers and its own step count, and checks all of them.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    url: { type: "string" },
    clients: { type: "string", default: "10" },
    duration: { type: "string", default: "1.5" },
    transport: { type: "string", default: "streamable" },
    header: { type: "string", multiple: true, default: [] },
  },
});
if (!opts.url) {
  console.error("usage: everything_client.mjs --url URL [--clients N] [--duration SECONDS]");
  process.exit(2);
}
const clientCount = Number.parseInt(opts.clients, 10);
const duration = Number.parseFloat(opts.duration);

const LRO = "trigger-long-running-operation";

// headers are the --header options, sent on every request of every client.
const headers = {};
for (const h of opts.header) {
  const i = h.indexOf(":");
  if (i <= 0) {
    console.error(`bad --header ${JSON.stringify(h)}: want "Name: value"`);
    process.exit(2);
  }
  headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
}
const transportOpts = Object.keys(headers).length > 0 ? { requestInit: { headers } } : undefined;

// textOf returns the concatenated text content of a tool result.
function textOf(result) {
  return (result.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

async function runClient(i) {
  const report = { client: i, tools: 0, echo: false, sum: false, progress: [], steps: 0, errors: [] };
  const fail = (msg) => report.errors.push(msg);

  const client = new Client({ name: `mcpgate-e2e-${i}`, version: "1.0.0" });
  // Progress for a token this client does not know lands here: a misrouted notification. Once
  // the client is closing, its own aborts of open streams land here too; those are not errors.
  let closing = false;
  const lateProgress = []; // "unknown token" errors, judged at the end (see below)
  client.onerror = (err) => {
    const m = /progress notification for an unknown token: (.*)$/.exec(err?.message ?? "");
    if (m && opts.transport === "sse") lateProgress.push(JSON.parse(m[1]).params);
    else if (!closing) fail(`client error: ${err?.message ?? err}`);
  };
  const transport =
    opts.transport === "sse"
      ? new SSEClientTransport(new URL(opts.url), transportOpts)
      : new StreamableHTTPClientTransport(new URL(opts.url), transportOpts);

  try {
    await client.connect(transport);

    const { tools } = await client.listTools();
    report.tools = tools.length;
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const name of ["echo", "get-sum", LRO]) {
      if (!byName.has(name)) fail(`tools/list has no "${name}" (got ${[...byName.keys()].join(", ")})`);
    }
    const lroProps = Object.keys(byName.get(LRO)?.inputSchema?.properties ?? {});
    for (const arg of ["duration", "steps"]) {
      if (!lroProps.includes(arg)) fail(`${LRO} inputSchema has no "${arg}" (got ${lroProps.join(", ")})`);
    }
    if (report.errors.length > 0) return report;

    // Distinct per client, so a reply or notification delivered to the wrong client shows.
    const message = `client-${i}-${randomUUID()}`;
    const a = 1000 * (i + 1) + i;
    const b = 7 * i + 3;
    const steps = 3 + (i % 3);
    report.steps = steps;

    const echo = client.callTool({ name: "echo", arguments: { message } }).then((r) => {
      const text = textOf(r);
      if (r.isError || !text.includes(message)) fail(`echo: want text containing ${message}, got ${JSON.stringify(text)}`);
      else report.echo = true;
    });
    const sum = client.callTool({ name: "get-sum", arguments: { a, b } }).then((r) => {
      const text = textOf(r);
      // "The sum of A and B is S." - check the operands too: a reply for another client has other ones.
      const m = /sum of (\S+) and (\S+) is (\S+?)\.?$/.exec(text);
      if (r.isError || !m || Number(m[1]) !== a || Number(m[2]) !== b || Number(m[3]) !== a + b) {
        fail(`get-sum(${a}, ${b}): want ${a + b}, got ${JSON.stringify(text)}`);
      } else report.sum = true;
    });
    const lro = client
      .callTool({ name: LRO, arguments: { duration, steps } }, undefined, {
        onprogress: (p) => report.progress.push({ progress: p.progress, total: p.total }),
        resetTimeoutOnProgress: true,
      })
      .then((r) => {
        if (r.isError) fail(`${LRO}: error result ${JSON.stringify(r)}`);
        if (!textOf(r).includes(`Steps: ${steps}`)) fail(`${LRO}: result for another call: ${JSON.stringify(textOf(r))}`);
      });
    // All three in flight at once on one session: replies must come back matched by id.
    const settled = await Promise.allSettled([echo, sum, lro]);
    for (const s of settled) if (s.status === "rejected") fail(`call failed: ${s.reason?.message ?? s.reason}`);

    // Exactly this call's progress: 1..steps, each with total == steps, nothing else.
    const want = Array.from({ length: steps }, (_, k) => ({ progress: k + 1, total: steps }));
    // The SDK's legacy SSE transport dispatches a chunk's events in one task while it handles
    // notifications a microtask later, so progress arriving in the same chunk as the reply
    // reaches a handler already removed ("unknown token"); it happens against
    // server-everything's own SSE mode too. On a busy machine the client reads late and every
    // step can share the reply's chunk. Accept exactly that: the last steps, all of one token,
    // with this call's own total, completing in order what arrived in time; anything else is
    // still a failure.
    const late = lateProgress.map((p) => ({ progress: p.progress, total: p.total }));
    const together = [...report.progress, ...late];
    if (
      lateProgress.length > 0 &&
      new Set(lateProgress.map((p) => JSON.stringify(p.progressToken))).size === 1 &&
      JSON.stringify(together) === JSON.stringify(want)
    ) {
      report.progress = together;
      report.lateFinalProgress = lateProgress.length;
    } else if (lateProgress.length > 0) {
      fail(`progress for an unknown token: ${JSON.stringify(lateProgress)}`);
    }
    if (JSON.stringify(report.progress) !== JSON.stringify(want)) {
      fail(`progress: want ${JSON.stringify(want)}, got ${JSON.stringify(report.progress)}`);
    }

    closing = true;
    // Streamable HTTP ends the session with DELETE; a legacy SSE session ends with its stream.
    if (typeof transport.terminateSession === "function") await transport.terminateSession();
  } catch (err) {
    fail(`${err?.name ?? "Error"}: ${err?.message ?? err}`);
  } finally {
    closing = true;
    await client.close().catch((err) => fail(`close: ${err?.message ?? err}`));
  }
  return report;
}

const results = await Promise.all(Array.from({ length: clientCount }, (_, i) => runClient(i)));
const failed = results.filter((r) => r.errors.length > 0).length;
const summary = { ok: failed === 0 && results.length === clientCount, clients: clientCount, failed, results };
process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(summary.ok ? 0 : 1);
