// aggregate_client.mjs checks one mcpgate endpoint that merges several servers, with the official
// TypeScript SDK client: it lists each member server directly (through the gateway's
// /servers/NAME/mcp), lists the endpoint, and checks that the endpoint's tools and prompts are
// exactly the members', each renamed PREFIX + SEPARATOR + NAME and otherwise unchanged, and its
// resources exactly the members' with their URIs unchanged. Then it calls tools of each member
// through the endpoint and checks their results (the reference servers server-memory,
// server-everything and server-sequential-thinking), and that an unprefixed name is not a tool.
//
// Usage: node aggregate_client.mjs --url ENDPOINT_URL [--transport streamable|sse]
//          --member NAME=URL [--member NAME=URL ...] [--prefix NAME=PREFIX ...] [--separator __]
//          [--one-page]
//
// With --one-page the endpoint's lists are read as Claude.ai, Claude Code, Codex and Copilot CLI
// read them: one listTools() (listPrompts(), listResources()) call each, a nextCursor ignored but
// reported as an error. The members are still listed to their end.
//
// A member's prefix is its name unless --prefix says otherwise. Members are recognized by the
// tools they have: "echo"/"get-sum" (server-everything), "create_entities"/"open_nodes"
// (server-memory), "sequentialthinking" (server-sequential-thinking); each found is called.
//
// It prints one JSON summary on stdout and exits 0 only if every check passed. It must stand
// next to the node_modules it imports (scripts/peers.sh and the Go test copy it into .cache/peers).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    url: { type: "string" },
    transport: { type: "string", default: "streamable" },
    member: { type: "string", multiple: true, default: [] },
    prefix: { type: "string", multiple: true, default: [] },
    separator: { type: "string", default: "__" },
    "one-page": { type: "boolean", default: false },
  },
});
if (!opts.url || opts.member.length === 0) {
  console.error("usage: aggregate_client.mjs --url URL [--transport streamable|sse] --member NAME=URL ... [--prefix NAME=PREFIX ...]");
  process.exit(2);
}
const splitKV = (s) => {
  const i = s.indexOf("=");
  return i < 0 ? [s, ""] : [s.slice(0, i), s.slice(i + 1)];
};
const members = opts.member.map((m) => {
  const [name, url] = splitKV(m);
  return { name, url, prefix: name };
});
for (const p of opts.prefix) {
  const [name, prefix] = splitKV(p);
  const m = members.find((m) => m.name === name);
  if (!m) {
    console.error(`--prefix ${p}: no --member ${name}`);
    process.exit(2);
  }
  m.prefix = prefix;
}
const exposed = (m, name) => (m.prefix === "" ? name : m.prefix + opts.separator + name);

const report = {
  ok: false,
  transport: opts.transport,
  members: {}, // name -> {tools, prompts, resources}: what the member lists directly
  endpoint: { tools: [], prompts: [], resources: [], capabilities: null, serverInfo: null, requests: {} },
  calls: {}, // what was called through the endpoint and what it returned
  errors: [],
};
const fail = (msg) => report.errors.push(msg);

function textOf(result) {
  return (result?.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

// listAll follows nextCursor to the end; it fails on a repeated cursor rather than looping.
async function listAll(client, method, key) {
  const items = [];
  const seen = new Set();
  let cursor;
  for (let page = 0; ; page++) {
    const res = await client[method](cursor === undefined ? {} : { cursor });
    items.push(...(res[key] ?? []));
    if (!res.nextCursor) return items;
    if (seen.has(res.nextCursor) || page > 1000) throw new Error(`${method}: cursor ${res.nextCursor} repeats`);
    seen.add(res.nextCursor);
    cursor = res.nextCursor;
  }
}

// listOne reads the first page only, as the clients that ignore nextCursor do.
async function listOne(client, method, key) {
  const res = await client[method]({});
  if (res.nextCursor) fail(`${method}: the first page has a nextCursor: a client reading one page misses the rest`);
  report.endpoint.requests[method] = (report.endpoint.requests[method] ?? 0) + 1;
  return res[key] ?? [];
}

// lists returns the tools, prompts and resources a server lists (an empty list for a kind it
// does not declare): every page, or with onePage the first page only.
async function lists(client, onePage = false) {
  const caps = client.getServerCapabilities() ?? {};
  const list = onePage ? listOne : listAll;
  return {
    tools: caps.tools ? await list(client, "listTools", "tools") : [],
    prompts: caps.prompts ? await list(client, "listPrompts", "prompts") : [],
    resources: caps.resources ? await list(client, "listResources", "resources") : [],
  };
}

function newTransport(url, kind) {
  return kind === "sse" ? new SSEClientTransport(new URL(url)) : new StreamableHTTPClientTransport(new URL(url));
}

async function connect(name, url, kind) {
  const client = new Client({ name: `mcpgate-aggregate-e2e-${name}`, version: "1.0.0" });
  client.onerror = (err) => {
    if (!client.closing) fail(`${name}: client error: ${err?.message ?? err}`);
  };
  const transport = newTransport(url, kind);
  await client.connect(transport);
  return { client, transport };
}

async function close({ client, transport }) {
  client.closing = true;
  if (typeof transport.terminateSession === "function") await transport.terminateSession().catch(() => {});
  await client.close().catch((err) => fail(`close: ${err?.message ?? err}`));
}

// sameExceptName compares what a client sees of a tool or prompt besides its name.
function sameExceptName(a, b) {
  const strip = (x) => {
    const { name, _meta, ...rest } = x;
    return rest;
  };
  return isDeepStrictEqual(strip(a), strip(b));
}

// checkKind compares the endpoint's list of one kind with the members' lists.
function checkKind(kind, got, want, keyOf) {
  const gotKeys = got.map(keyOf);
  const dup = gotKeys.filter((k, i) => gotKeys.indexOf(k) !== i);
  if (dup.length > 0) fail(`endpoint ${kind}: listed more than once: ${[...new Set(dup)].join(", ")}`);
  const wantKeys = new Map(want.map((w) => [w.key, w]));
  const missing = [...wantKeys.keys()].filter((k) => !gotKeys.includes(k));
  const extra = gotKeys.filter((k) => !wantKeys.has(k));
  if (missing.length > 0) fail(`endpoint ${kind}: missing ${missing.join(", ")}`);
  if (extra.length > 0) fail(`endpoint ${kind}: unexpected ${extra.join(", ")}`);
  for (const item of got) {
    const w = wantKeys.get(keyOf(item));
    if (w && !sameExceptName(item, w.item)) {
      fail(`endpoint ${kind} ${keyOf(item)} differs from ${w.member}'s: ${JSON.stringify(item)} vs ${JSON.stringify(w.item)}`);
    }
  }
}

const uniq = randomUUID();
let endpoint;
const direct = {};
try {
  // 1. Each member, listed directly.
  for (const m of members) {
    direct[m.name] = await connect(m.name, m.url, "streamable");
    const l = await lists(direct[m.name].client);
    report.members[m.name] = {
      tools: l.tools.map((t) => t.name),
      prompts: l.prompts.map((p) => p.name),
      resources: l.resources.map((r) => r.uri),
    };
    m.lists = l;
  }

  // 2. The endpoint, listed.
  endpoint = await connect("endpoint", opts.url, opts.transport);
  const ec = endpoint.client;
  report.endpoint.capabilities = ec.getServerCapabilities() ?? null;
  report.endpoint.serverInfo = ec.getServerVersion() ?? null;
  const got = await lists(ec, opts["one-page"]);
  report.endpoint.tools = got.tools.map((t) => t.name);
  report.endpoint.prompts = got.prompts.map((p) => p.name);
  report.endpoint.resources = got.resources.map((r) => r.uri);
  for (const [kind, caps] of [
    ["tools", "tools"],
    ["prompts", "prompts"],
    ["resources", "resources"],
  ]) {
    const any = members.some((m) => m.lists[kind].length > 0);
    if (any && !report.endpoint.capabilities?.[caps]) fail(`endpoint does not declare ${caps} though a member lists ${kind}`);
  }
  const want = (kind, keyOf) =>
    members.flatMap((m) => m.lists[kind].map((item) => ({ key: keyOf(m, item), item, member: m.name })));
  checkKind("tools", got.tools, want("tools", (m, t) => exposed(m, t.name)), (t) => t.name);
  checkKind("prompts", got.prompts, want("prompts", (m, p) => exposed(m, p.name)), (p) => p.name);
  checkKind("resources", got.resources, want("resources", (m, r) => r.uri), (r) => r.uri);

  // 3. Calls through the endpoint, one member at a time.
  const call = async (m, tool, args) => {
    const name = exposed(m, tool);
    const res = await ec.callTool({ name, arguments: args });
    report.calls[name] = { isError: res.isError ?? false, text: textOf(res).slice(0, 500) };
    if (res.isError) fail(`${name}: error result ${JSON.stringify(res)}`);
    return res;
  };
  for (const m of members) {
    const has = (tool) => m.lists.tools.some((t) => t.name === tool);
    if (has("echo") && has("get-sum")) {
      const message = `aggregate-${uniq}`;
      const echo = await call(m, "echo", { message });
      if (textOf(echo) !== `Echo: ${message}`) fail(`${m.name} echo: got ${JSON.stringify(textOf(echo))}`);
      const sum = await call(m, "get-sum", { a: 1234, b: 4321 });
      if (!/sum of 1234 and 4321 is 5555\b/.test(textOf(sum))) fail(`${m.name} get-sum: got ${JSON.stringify(textOf(sum))}`);
      // A prompt and a resource of the same member, through the endpoint.
      if (m.lists.prompts.some((p) => p.name === "simple-prompt")) {
        const name = exposed(m, "simple-prompt");
        const p = await ec.getPrompt({ name });
        const d = await direct[m.name].client.getPrompt({ name: "simple-prompt" });
        report.calls[`prompt ${name}`] = { messages: p.messages.length };
        if (!isDeepStrictEqual(p.messages, d.messages) || p.messages.length === 0) {
          fail(`prompt ${name}: got ${JSON.stringify(p.messages)}, directly ${JSON.stringify(d.messages)}`);
        }
      }
    }
    if (has("create_entities") && has("open_nodes")) {
      const entity = `aggregate-entity-${uniq}`;
      const observation = `created through ${opts.url}`;
      const created = await call(m, "create_entities", {
        entities: [{ name: entity, entityType: "e2e", observations: [observation] }],
      });
      if (!textOf(created).includes(entity)) fail(`${m.name} create_entities: got ${JSON.stringify(textOf(created))}`);
      // The entity is in the one memory server: read back through the endpoint and directly.
      for (const [via, client, name] of [
        ["endpoint", ec, exposed(m, "open_nodes")],
        ["directly", direct[m.name].client, "open_nodes"],
      ]) {
        const r = await client.callTool({ name, arguments: { names: [entity] } });
        const t = textOf(r);
        if (r.isError || !t.includes(entity) || !t.includes(observation)) {
          fail(`${m.name} open_nodes ${via}: got ${JSON.stringify(t)}`);
        }
      }
      report.calls.memoryEntity = entity;
    }
    if (has("sequentialthinking")) {
      const r = await call(m, "sequentialthinking", {
        thought: `aggregate thought ${uniq}`,
        thoughtNumber: 1,
        totalThoughts: 3,
        nextThoughtNeeded: true,
      });
      let v;
      try {
        v = JSON.parse(textOf(r));
      } catch {
        v = null;
      }
      if (!v || v.thoughtNumber !== 1 || v.totalThoughts !== 3 || v.nextThoughtNeeded !== true || !(v.thoughtHistoryLength >= 1)) {
        fail(`${m.name} sequentialthinking: got ${JSON.stringify(textOf(r))}`);
      }
    }
  }

  // A resource of each member, read through the endpoint by its own URI (routed to its owner)
  // and directly: the same contents.
  for (const m of members) {
    const res =
      m.lists.resources.find((r) => r.uri.startsWith("demo://resource/static/")) ?? m.lists.resources[0];
    if (!res) continue;
    const viaEndpoint = await ec.readResource({ uri: res.uri });
    const viaServer = await direct[m.name].client.readResource({ uri: res.uri });
    report.calls[`resource ${res.uri}`] = { contents: viaEndpoint.contents.length };
    if (viaEndpoint.contents.length === 0 || !isDeepStrictEqual(viaEndpoint.contents, viaServer.contents)) {
      fail(`resources/read ${res.uri}: got ${JSON.stringify(viaEndpoint.contents).slice(0, 300)}, directly ${JSON.stringify(viaServer.contents).slice(0, 300)}`);
    }
  }

  // 4. An unprefixed name of a prefixed member is not a tool of the endpoint.
  const prefixed = members.find((m) => m.prefix !== "" && m.lists.tools.length > 0);
  if (prefixed) {
    const bare = prefixed.lists.tools[0].name;
    if (!report.endpoint.tools.includes(bare)) {
      let outcome;
      try {
        const r = await ec.callTool({ name: bare, arguments: {} });
        outcome = r.isError ? `error result: ${textOf(r)}` : `success: ${JSON.stringify(r)}`;
        if (!r.isError) fail(`calling the unprefixed ${bare} through the endpoint succeeded: ${JSON.stringify(r)}`);
      } catch (err) {
        outcome = `error ${err?.code}: ${err?.message}`;
      }
      report.calls[`unprefixed ${bare}`] = { outcome };
    }
  }
} catch (err) {
  fail(`${err?.name ?? "Error"}: ${err?.message ?? err}`);
} finally {
  for (const c of [endpoint, ...Object.values(direct)]) if (c) await close(c);
}

report.ok = report.errors.length === 0;
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(report.ok ? 0 : 1);
