// oauth_client.mjs runs the official TypeScript SDK client's OAuth flow against one MCP server URL
// (a gateway's /servers/NAME/mcp) protected by an OAuth 2.1 authorization server that approves
// every authorization at once (oauth_as.mjs, the SDK's demo server), then checks what a resource
// server must refuse.
//
// Usage: node oauth_client.mjs --url URL [--issuer URL] [--other-url URL]
//                              [--tool NAME --args JSON --expect TEXT] [--invalid-status N]
//
//   --url        the protected MCP endpoint
//   --issuer     the authorization server the resource metadata must name (optional)
//   --other-url  another protected endpoint of the same gateway, trusting the same authorization
//                server: the token obtained for --url must be refused there (wrong audience)
//   --tool, --args, --expect   the tool to call once connected, its arguments, and a text its
//                result must contain (default: server-everything's echo)
//
// The flow, all by the SDK (StreamableHTTPClientTransport with an OAuthClientProvider; every HTTP
// request goes through a recording fetch): connect -> 401 with WWW-Authenticate -> protected
// resource metadata (RFC 9728) -> authorization server metadata (RFC 8414) -> dynamic client
// registration (RFC 7591) -> authorization request with PKCE and the resource parameter (RFC 8707),
// whose redirect is read here as a browser would follow it, capturing the code -> token request
// (with the resource parameter) -> connect again with the token -> tools/list, tools/call.
//
// Then, with plain fetch: no token -> 401 whose resource_metadata is an absolute URL of the
// path-inserted form; a tampered token -> 401; the token at --other-url -> 401; the token itself
// -> 200 (so the refusals are about the token, not the request).
//
// It prints one JSON summary on stdout, including the access token and the session id (test
// credentials of a throwaway in-memory server, for the Go test's own checks), and exits 0 only if
// every check passed. It must stand next to the node_modules it imports.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { InMemoryOAuthClientProvider } from "@modelcontextprotocol/sdk/examples/client/simpleOAuthClientProvider.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    url: { type: "string" },
    issuer: { type: "string" },
    "other-url": { type: "string" },
    tool: { type: "string", default: "echo" },
    args: { type: "string", default: '{"message":"hello through oauth"}' },
    expect: { type: "string", default: "hello through oauth" },
    name: { type: "string", default: "mcpgate-e2e-oauth" },
    // The status an invalid (tampered) token gets: 401 from a resource server; the SDK's example
    // server answers 500 (its token verifier throws a plain Error), so its baseline says so.
    "invalid-status": { type: "string", default: "401" },
  },
});
if (!opts.url) {
  console.error("usage: oauth_client.mjs --url URL [--issuer URL] [--other-url URL] [--tool NAME --args JSON --expect TEXT]");
  process.exit(2);
}
const serverUrl = new URL(opts.url);

const summary = {
  ok: false,
  url: opts.url,
  flow: [], // every HTTP request of the SDK's flow: method, url, status, and what matters of it
  challenge: null, // the first 401's WWW-Authenticate
  resourceMetadataUrl: null,
  resourceMetadata: null,
  authorizationServer: null,
  clientId: null,
  authorization: null, // the authorization request's parameters and the redirect
  tokenRequest: null, // the token request's parameters (no secrets)
  token: null,
  sessionId: null,
  tools: [],
  call: null,
  negative: {},
  errors: [],
};
const fail = (msg) => summary.errors.push(msg);

// recordingFetch is the fetch the SDK uses for everything (MCP requests and the OAuth flow).
async function recordingFetch(input, init = {}) {
  const url = new URL(input instanceof Request ? input.url : String(input));
  const method = (init.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase();
  const entry = { method, url: url.href };
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  entry.bearer = /^bearer /i.test(headers.get("authorization") ?? "");
  if (init.body instanceof URLSearchParams || typeof init.body === "string") {
    const body = String(init.body);
    if (url.href === summary.authorizationServer?.token_endpoint) {
      const p = new URLSearchParams(body);
      entry.params = Object.fromEntries([...p].filter(([k]) => k !== "client_secret" && k !== "code_verifier"));
      entry.params.code_verifier = p.has("code_verifier") ? "(sent)" : undefined;
      summary.tokenRequest = entry.params;
    } else if (headers.get("content-type")?.includes("json")) {
      try {
        const msg = JSON.parse(body);
        entry.rpc = msg.method ?? "(reply)";
      } catch {
        // not JSON-RPC
      }
    }
  }
  summary.flow.push(entry);
  const res = await fetch(input, init);
  entry.status = res.status;
  if (res.status === 401 && !summary.challenge) summary.challenge = res.headers.get("www-authenticate");
  if (url.pathname.startsWith("/.well-known/oauth-authorization-server") && res.ok) {
    summary.authorizationServer = await res.clone().json();
  }
  if (url.pathname.startsWith("/.well-known/oauth-protected-resource") && res.ok) {
    summary.resourceMetadataUrl = url.href;
    summary.resourceMetadata = await res.clone().json();
  }
  return res;
}

// AutoApprovingProvider is the SDK example's in-memory provider whose "browser" is a fetch: it
// requests the authorization URL without following the redirect and takes the code from the
// redirect's Location, as the user agent would deliver it to the redirect URI. The redirect URI
// itself is never contacted.
class AutoApprovingProvider extends InMemoryOAuthClientProvider {
  code = undefined;

  async redirectToAuthorization(authorizationUrl) {
    const params = Object.fromEntries(authorizationUrl.searchParams);
    const entry = { method: "GET", url: authorizationUrl.origin + authorizationUrl.pathname, browser: true };
    summary.flow.push(entry);
    const res = await fetch(authorizationUrl, { redirect: "manual" });
    entry.status = res.status;
    const location = res.headers.get("location");
    summary.authorization = { params, status: res.status, redirect: location && new URL(location, authorizationUrl).origin };
    if (res.status !== 302 || !location) {
      fail(`authorization request: got ${res.status} (location ${location}), want a 302 redirect with a code: ${await res.text()}`);
      return;
    }
    const target = new URL(location, authorizationUrl);
    if (target.origin + target.pathname !== String(this.redirectUrl)) {
      fail(`authorization redirect to ${target.origin + target.pathname}, want ${this.redirectUrl}`);
    }
    if (target.searchParams.get("error")) {
      fail(`authorization refused: ${target.searchParams.get("error")}: ${target.searchParams.get("error_description")}`);
      return;
    }
    if (params.state !== undefined && target.searchParams.get("state") !== params.state) {
      fail(`authorization redirect state ${target.searchParams.get("state")}, want ${params.state}`);
    }
    this.code = target.searchParams.get("code") ?? undefined;
  }
}

// initializeBody is a plain initialize request, for the raw checks.
const initializeBody = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: opts.name, version: "1.0.0" } },
});

// rawInitialize POSTs an initialize to url with the given Authorization header (none if null).
async function rawInitialize(url, authorization) {
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  if (authorization !== null) headers.authorization = authorization;
  const res = await fetch(url, { method: "POST", headers, body: initializeBody });
  const body = await res.text();
  return {
    status: res.status,
    wwwAuthenticate: res.headers.get("www-authenticate"),
    sessionId: res.headers.get("mcp-session-id"),
    body: body.slice(0, 300),
  };
}

// authParam returns a parameter of a WWW-Authenticate Bearer challenge (quoted or not).
function authParam(header, name) {
  const m = new RegExp(`(?:^|[\\s,])${name}=(?:"([^"]*)"|([^\\s,]+))`).exec(header ?? "");
  return m ? (m[1] ?? m[2]) : undefined;
}

// tamper changes the token's last character (keeping it a plausible token).
function tamper(token) {
  const last = token.at(-1);
  return token.slice(0, -1) + (last === "A" ? "B" : "A");
}

// checkChallenge checks a 401's WWW-Authenticate for url: a Bearer challenge whose
// resource_metadata is absolute, on url's origin, in the path-inserted form of RFC 9728.
function checkChallenge(what, res, url) {
  if (res.status !== 401) {
    fail(`${what}: status ${res.status}, want 401: ${res.body}`);
    return;
  }
  const h = res.wwwAuthenticate;
  if (!/^bearer\b/i.test(h ?? "")) {
    fail(`${what}: WWW-Authenticate ${JSON.stringify(h)}, want a Bearer challenge`);
    return;
  }
  const rm = authParam(h, "resource_metadata");
  if (!rm) {
    fail(`${what}: WWW-Authenticate ${JSON.stringify(h)} has no resource_metadata`);
    return;
  }
  let abs;
  try {
    abs = new URL(rm); // no base: a relative URL throws (and Claude ignores one)
  } catch {
    fail(`${what}: resource_metadata ${JSON.stringify(rm)} is not an absolute URL`);
    return;
  }
  const u = new URL(url);
  const want = `${u.origin}/.well-known/oauth-protected-resource${u.pathname}`;
  if (abs.href !== want) fail(`${what}: resource_metadata ${abs.href}, want ${want}`);
}

async function main() {
  // 1. The OAuth flow, all by the SDK.
  const provider = new AutoApprovingProvider("http://127.0.0.1/oauth/callback", {
    client_name: opts.name,
    redirect_uris: ["http://127.0.0.1/oauth/callback"],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "client_secret_post",
  });
  const first = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: recordingFetch });
  const probe = new Client({ name: opts.name, version: "1.0.0" });
  try {
    await probe.connect(first);
    fail("connected without authorization: the server did not ask for a token");
    await probe.close();
    return;
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) {
      fail(`first connect: ${err?.message ?? err}, want UnauthorizedError (the redirect to authorization)`);
      return;
    }
  }
  if (!provider.code) {
    if (summary.errors.length === 0) fail("no authorization code was captured");
    return;
  }
  await first.finishAuth(provider.code); // the token request
  const tokens = provider.tokens();
  summary.token = tokens?.access_token ?? null;
  summary.clientId = provider.clientInformation()?.client_id ?? null;
  if (!summary.token) {
    fail("no access token after the token request");
    return;
  }

  const transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: recordingFetch });
  const client = new Client({ name: opts.name, version: "1.0.0" });
  let closing = false; // once closing, the client's own aborts of its open streams are not errors
  client.onerror = (err) => {
    if (!closing) fail(`client error: ${err?.message ?? err}`);
  };
  try {
    await client.connect(transport);
    summary.sessionId = transport.sessionId ?? null;
    const { tools } = await client.listTools();
    summary.tools = tools.map((t) => t.name);
    if (!summary.tools.includes(opts.tool)) fail(`tools/list has no ${opts.tool} (got ${summary.tools.join(", ")})`);
    const result = await client.callTool({ name: opts.tool, arguments: JSON.parse(opts.args) });
    const text = (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
    summary.call = { tool: opts.tool, isError: Boolean(result.isError), text };
    if (result.isError || !text.includes(opts.expect)) fail(`${opts.tool}: got ${JSON.stringify(result)}, want text containing ${JSON.stringify(opts.expect)}`);
  } finally {
    closing = true;
    await client.close().catch(() => {});
  }

  checkFlow();

  // 2. What must be refused, with plain requests.
  const none = await rawInitialize(opts.url, null);
  summary.negative.noToken = { status: none.status, wwwAuthenticate: none.wwwAuthenticate };
  checkChallenge("no token", none, opts.url);

  const tampered = await rawInitialize(opts.url, `Bearer ${tamper(summary.token)}`);
  summary.negative.tampered = { status: tampered.status, wwwAuthenticate: tampered.wwwAuthenticate };
  const invalidStatus = Number.parseInt(opts["invalid-status"], 10);
  if (invalidStatus === 401) checkChallenge("tampered token", tampered, opts.url);
  else if (tampered.status !== invalidStatus) fail(`tampered token: status ${tampered.status}, want ${invalidStatus}`);

  if (opts["other-url"]) {
    const other = await rawInitialize(opts["other-url"], `Bearer ${summary.token}`);
    summary.negative.otherResource = { url: opts["other-url"], status: other.status, wwwAuthenticate: other.wwwAuthenticate };
    checkChallenge("token of another resource", other, opts["other-url"]);
  }

  const good = await rawInitialize(opts.url, `Bearer ${summary.token}`);
  summary.negative.control = { status: good.status };
  if (good.status !== 200) fail(`the token itself, raw: status ${good.status}, want 200: ${good.body}`);
}

// checkFlow checks the recorded requests: the steps of the authorization, in order, with the
// resource parameter naming this server.
function checkFlow() {
  const f = summary.flow;
  const at = (pred, from) => f.findIndex((e, i) => i >= from && pred(e));
  const as = summary.authorizationServer;
  if (!as) return fail("the authorization server metadata was never fetched");
  const steps = [
    ["401 on the first MCP request", (e) => e.url === opts.url && e.status === 401 && !e.bearer],
    ["protected resource metadata", (e) => e.url.includes("/.well-known/oauth-protected-resource") && e.status === 200],
    ["authorization server metadata", (e) => e.url.includes("/.well-known/oauth-authorization-server") && e.status === 200],
    ["dynamic client registration", (e) => e.url === as.registration_endpoint && e.method === "POST" && e.status === 201],
    ["authorization (redirect with a code)", (e) => e.browser && e.url === as.authorization_endpoint && e.status === 302],
    ["token request", (e) => e.url === as.token_endpoint && e.method === "POST" && e.status === 200],
    ["MCP request with the token", (e) => e.url === opts.url && e.bearer && e.status === 200],
  ];
  let from = 0;
  for (const [name, pred] of steps) {
    const i = at(pred, from);
    if (i < 0) {
      fail(`flow: no "${name}" step after request ${from} (flow: ${JSON.stringify(f.map((e) => `${e.method} ${e.url} ${e.status}`))})`);
      return;
    }
    from = i + 1;
  }

  // The challenge's resource_metadata is where the SDK looked first.
  const rm = authParam(summary.challenge, "resource_metadata");
  if (rm && summary.resourceMetadataUrl !== rm) fail(`resource metadata fetched from ${summary.resourceMetadataUrl}, challenge named ${rm}`);
  const md = summary.resourceMetadata;
  if (md?.resource !== opts.url) fail(`protected resource metadata: resource ${md?.resource}, want ${opts.url}`);
  if (opts.issuer) {
    const norm = (s) => String(s).replace(/\/$/, "");
    if (!(md?.authorization_servers ?? []).some((s) => norm(s) === norm(opts.issuer))) {
      fail(`protected resource metadata: authorization_servers ${JSON.stringify(md?.authorization_servers)}, want ${opts.issuer}`);
    }
  }
  const a = summary.authorization?.params ?? {};
  if (a.resource !== opts.url) fail(`authorization request: resource ${a.resource}, want ${opts.url}`);
  if (a.code_challenge_method !== "S256" || !a.code_challenge) fail(`authorization request without PKCE S256: ${JSON.stringify(a)}`);
  const t = summary.tokenRequest ?? {};
  if (t.resource !== opts.url) fail(`token request: resource ${t.resource}, want ${opts.url}`);
  if (t.grant_type !== "authorization_code" || t.code_verifier !== "(sent)") fail(`token request: ${JSON.stringify(t)}`);
}

try {
  await main();
} catch (err) {
  fail(`unexpected: ${err?.stack ?? err}`);
}
summary.ok = summary.errors.length === 0;
process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(summary.ok ? 0 : 1);
