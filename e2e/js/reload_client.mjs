// reload_client.mjs checks, with the official TypeScript SDK client, that an mcpgate session of
// an endpoint survives config reloads that change the endpoint's members (the client does not
// initialize again after a 404: a session ended by a reload would fail every later call).
//
// One session, opened at --url, then for each --step FILE in order: the file replaces --config
// (written beside it and renamed over it, as a ConfigMap update swaps its files), the gateway's
// file watch reloads it, and the client waits for notifications/tools/list_changed, lists the
// tools again and checks --expect-after for that step:
//   +NAME   the tool NAME is listed, and a call of it (arguments from --args NAME=JSON, default
//           {}) succeeds;
//   -NAME   the tool NAME is no longer listed, and a call of it is a JSON-RPC error whose
//           message contains --removed-text for that step;
//   =NAME   a call of NAME still succeeds.
// The session id must be the same from the first call to the last.
//
// Usage: node reload_client.mjs --url URL --config PATH --step FILE --expect STEP:+|-|=TOOL ...
//          [--args TOOL=JSON ...] [--removed-text STEP:TEXT ...]
//
// It prints one JSON summary on stdout and exits 0 only if every check passed. It must stand
// next to the node_modules it imports (scripts/peers.sh and the Go test copy it into .cache/peers).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { copyFileSync, renameSync } from "node:fs";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    url: { type: "string" },
    config: { type: "string" },
    step: { type: "string", multiple: true, default: [] },
    expect: { type: "string", multiple: true, default: [] },
    args: { type: "string", multiple: true, default: [] },
    "removed-text": { type: "string", multiple: true, default: [] },
    timeout: { type: "string", default: "60000" },
  },
});
if (!opts.url || !opts.config || opts.step.length === 0) {
  console.error("usage: reload_client.mjs --url URL --config PATH --step FILE ... --expect STEP:+TOOL ...");
  process.exit(2);
}
const cut = (s, sep) => {
  const i = s.indexOf(sep);
  return i < 0 ? [s, ""] : [s.slice(0, i), s.slice(i + 1)];
};
const argsOf = Object.fromEntries(opts.args.map((a) => cut(a, "=")).map(([k, v]) => [k, JSON.parse(v)]));
const expects = opts.expect.map((e) => {
  const [step, what] = cut(e, ":");
  return { step: Number(step), op: what[0], tool: what.slice(1) };
});
const removedText = Object.fromEntries(opts["removed-text"].map((r) => cut(r, ":")).map(([k, v]) => [Number(k), v]));
const timeout = Number(opts.timeout);

const report = { ok: false, sessions: [], steps: [], errors: [] };
const fail = (msg) => report.errors.push(msg);
const textOf = (res) => (res.content ?? []).map((c) => c.text ?? "").join("");
// listAll follows nextCursor: the endpoint may page its merged list member by member.
const listAll = async () => {
  const names = [];
  let cursor;
  for (let pages = 0; pages < 100; pages++) {
    const res = await client.listTools(cursor ? { cursor } : {});
    names.push(...res.tools.map((t) => t.name));
    if (!res.nextCursor) break;
    cursor = res.nextCursor;
  }
  return names;
};

let changed = 0;
let wake = null;
const client = new Client({ name: "mcpgate-reload-e2e", version: "1.0.0" });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  changed++;
  if (wake) wake();
});
// waitChanged waits until more than seen tools/list_changed notifications came.
const waitChanged = (seen) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no tools/list_changed within ${timeout} ms`)), timeout);
    const check = () => {
      if (changed > seen) {
        clearTimeout(timer);
        wake = null;
        resolve();
      }
    };
    wake = check;
    check();
  });

const transport = new StreamableHTTPClientTransport(new URL(opts.url));
try {
  await client.connect(transport);
  report.sessions.push(transport.sessionId);
  const before = await listAll();
  report.steps.push({ step: 0, tools: before });
  for (const [n, file] of opts.step.entries()) {
    const step = n + 1;
    const seen = changed;
    const tmp = `${opts.config}.step${step}`;
    copyFileSync(file, tmp);
    renameSync(tmp, opts.config);
    // A member joining is announced once it is up; one leaving at once. Either way the list
    // the client gets after the notification must show the change; a member still starting
    // announces itself again when it is up, so list until the expectations hold or time out.
    const deadline = Date.now() + timeout;
    let tools = [];
    let pending = expects.filter((e) => e.step === step && e.op !== "=");
    await waitChanged(seen);
    for (;;) {
      tools = await listAll();
      pending = pending.filter((e) => (e.op === "+") !== tools.includes(e.tool));
      if (pending.length === 0 || Date.now() > deadline) break;
      await waitChanged(changed).catch(() => {});
    }
    for (const e of pending) fail(`step ${step}: tool ${e.tool} ${e.op === "+" ? "not listed" : "still listed"}: ${tools}`);
    const calls = {};
    for (const e of expects.filter((e) => e.step === step)) {
      let outcome;
      try {
        const res = await client.callTool({ name: e.tool, arguments: argsOf[e.tool] ?? {} });
        outcome = { isError: res.isError ?? false, text: textOf(res).slice(0, 300) };
        if (e.op === "-") fail(`step ${step}: calling removed ${e.tool} succeeded: ${JSON.stringify(res)}`);
        else if (res.isError) fail(`step ${step}: ${e.tool}: error result ${outcome.text}`);
      } catch (err) {
        outcome = { error: String(err?.message ?? err), code: err?.code };
        if (e.op !== "-") fail(`step ${step}: ${e.tool}: ${outcome.error}`);
        else if (removedText[step] && !outcome.error.includes(removedText[step])) {
          fail(`step ${step}: removed ${e.tool}: error ${JSON.stringify(outcome.error)}, want it to contain ${JSON.stringify(removedText[step])}`);
        }
      }
      calls[e.tool] = outcome;
    }
    report.sessions.push(transport.sessionId);
    report.steps.push({ step, tools, calls, notifications: changed - seen });
  }
  if (new Set(report.sessions).size !== 1 || !report.sessions[0]) {
    fail(`the session id changed: ${report.sessions}`);
  }
} catch (err) {
  fail(`unexpected: ${err?.stack ?? err}`);
} finally {
  await client.close().catch(() => {});
}
report.ok = report.errors.length === 0;
console.log(JSON.stringify(report));
process.exit(report.ok ? 0 : 1);
