// reverse_client.mjs drives a 2026-07-28 server (the Go SDK's conformance server, pinned to that
// revision) through the gateway's reverse bridge with N concurrent clients of the official
// TypeScript SDK, which speaks the session eras (2025-11-25): the gateway answers their
// initialize from server/discover and turns the server's input_required results into real
// sampling, elicitation and roots requests on each client's stream.
//
// Usage: node reverse_client.mjs --url http://127.0.0.1:PORT/servers/NAME/mcp [--clients 4] [--no-logging]
//        (--no-logging: the logging/setLevel step is left out)
//
// It prints one JSON summary on stdout and exits 0 only if every check passed. Every client
// answers with values of its own (its name, its sampling text, its root), so an input request
// or a result delivered to the wrong session shows as another client's value.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: { url: { type: "string" }, clients: { type: "string", default: "4" }, "no-logging": { type: "boolean", default: false } },
});
if (!opts.url) {
  console.error("usage: reverse_client.mjs --url URL [--clients N]");
  process.exit(2);
}
const clientCount = Number.parseInt(opts.clients, 10);

function textOf(result) {
  return (result.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

// waitFor resolves when check() is true, or rejects after ms.
async function waitFor(check, ms, what) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// Phases all clients pass together: a log message of a stdio server carries nothing that ties it
// to a request, so the gateway delivers it only while one session has requests at that server
// (else it cannot know whose it is); the logging step runs one client at a time, after the
// concurrent ones. A client that fails before a barrier still arrives at it (its finally block):
// else the others would wait there forever, and the summary naming its error would never print.
function barrier(n) {
  let waiting = 0;
  let release;
  const all = new Promise((r) => (release = r));
  return () => {
    if (++waiting === n) release();
    return all;
  };
}
const mrtrDone = barrier(clientCount);
const loggingDone = barrier(clientCount);
let loggingTurn = Promise.resolve();

// once returns f called at most once: a client's arrival at a barrier.
function once(f) {
  let done;
  return () => (done ??= f());
}

async function runClient(i) {
  const report = { client: i, checks: [], asked: { sampling: 0, elicitation: 0, roots: 0 }, logs: 0, listChanged: 0, errors: [] };
  const arriveMrtr = once(mrtrDone);
  const arriveLogging = once(loggingDone);
  const fail = (msg) => report.errors.push(msg);
  const name = `client-${i}`;
  const client = new Client(
    { name: `mcpgate-reverse-${i}`, version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
  );
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    report.asked.elicitation++;
    const props = Object.keys(req.params.requestedSchema?.properties ?? {});
    const content = {};
    for (const p of props) {
      if (p === "name") content.name = name;
      else if (p === "color") content.color = `color-${i}`;
      else if (p === "ok") content.ok = true;
      else if (p === "context") content.context = `context-${i}`;
    }
    return { action: "accept", content };
  });
  client.setRequestHandler(CreateMessageRequestSchema, async () => {
    report.asked.sampling++;
    return { role: "assistant", content: { type: "text", text: `Paris-${i}` }, model: `model-${i}`, stopReason: "endTurn" };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    report.asked.roots++;
    return { roots: [{ uri: `file:///root-${i}`, name: `root ${i}` }] };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, () => {
    report.logs++;
  });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    report.listChanged++;
  });
  let closing = false; // the client's own abort of its GET stream when it closes is no error
  client.onerror = (err) => {
    if (!closing) fail(`client error: ${err?.message ?? err}`);
  };
  const transport = new StreamableHTTPClientTransport(new URL(opts.url));

  const expect = async (label, call, want) => {
    try {
      const r = await call();
      const text = r.messages ? r.messages.map((m) => m.content?.text ?? "").join("\n") : textOf(r);
      if (r.isError || !want.every((w) => text.includes(w))) {
        fail(`${label}: want text with ${JSON.stringify(want)}, got ${JSON.stringify(r)}`);
      } else {
        report.checks.push(label);
      }
    } catch (err) {
      fail(`${label}: ${err?.message ?? err}`);
    }
  };

  try {
    await client.connect(transport);
    const info = client.getServerVersion();
    if (info?.name !== "mcp-conformance-test-server") fail(`serverInfo: ${JSON.stringify(info)}`);
    if (client.getServerCapabilities()?.tools === undefined) fail(`capabilities: ${JSON.stringify(client.getServerCapabilities())}`);
    await client.ping();

    const { tools } = await client.listTools();
    if (!tools.some((t) => t.name === "test_input_required_result_multi_round")) fail(`tools/list: ${tools.length} tools, no MRTR tools`);

    const call = (tool) => () => client.callTool({ name: tool, arguments: {} });
    // All at once on one session: each needs its own input round(s).
    await Promise.all([
      expect("elicitation", call("test_input_required_result_elicitation"), [`Hello, ${name}!`]),
      expect("sampling", call("test_input_required_result_sampling"), [`Sampling response: Paris-${i}`]),
      expect("roots", call("test_input_required_result_list_roots"), [`file:///root-${i}`]),
      expect("multiple inputs", call("test_input_required_result_multiple_inputs"), [`Paris-${i} ${name}`, "1 root(s)"]),
      expect("multi round", call("test_input_required_result_multi_round"), [`Multi-round complete: ${name} likes color-${i}`]),
      expect("request state", call("test_input_required_result_request_state"), ["state-ok"]),
      expect("prompt", () => client.getPrompt({ name: "test_input_required_result_prompt", arguments: {} }), [`Context: context-${i}`]),
    ]);
    // 2 + 1 + 1 (multiple inputs: name, greeting, roots) + 2 (multi round) + 1 + 1 elicitations.
    if (report.asked.elicitation < 6 || report.asked.sampling < 2 || report.asked.roots < 2) {
      fail(`asked: ${JSON.stringify(report.asked)}`);
    }

    await arriveMrtr();
    // logging/setLevel is the gateway's (the revision sets the level per request).
    const turn = loggingTurn.then(async () => {
      if (opts["no-logging"]) return;
      await client.setLoggingLevel("debug");
      await expect("logging", call("test_tool_with_logging"), []);
      await waitFor(() => report.logs >= 3, 5000, "3 log messages").catch((e) => fail(`logging: ${e.message} (got ${report.logs})`));
    });
    loggingTurn = turn.catch(() => {});
    await turn;
    await arriveLogging();

    // list_changed reaches the session from the listen the gateway holds for it.
    await expect("tool change", call("test_trigger_tool_change"), []);
    await waitFor(() => report.listChanged >= 1, 10000, "tools/list_changed").catch((e) => fail(e.message));

    closing = true;
    await transport.terminateSession();
  } catch (err) {
    fail(`${err?.name ?? "Error"}: ${err?.message ?? err}`);
  } finally {
    arriveMrtr();
    arriveLogging();
    await client.close().catch(() => {});
  }
  return report;
}

const results = await Promise.all(Array.from({ length: clientCount }, (_, i) => runClient(i)));
const failed = results.filter((r) => r.errors.length > 0).length;
console.log(JSON.stringify({ ok: failed === 0, clients: clientCount, failed, results }));
process.exit(failed === 0 ? 0 : 1);
