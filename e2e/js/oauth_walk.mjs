// oauth_walk.mjs runs the official TypeScript SDK client's whole OAuth flow against a gateway
// whose own authorization server (gateway.auth.server) protects --url, signing in on its pages
// the way a person would, then refreshes its token through the SDK and calls again.
//
// Usage: node oauth_walk.mjs --url URL --user NAME --password PASSWORD
//                            [--tool NAME --args JSON --expect TEXT]
//
// The flow, all by the SDK (StreamableHTTPClientTransport with an OAuthClientProvider; every HTTP
// request goes through a recording fetch): connect -> 401 -> protected resource metadata ->
// authorization server metadata -> dynamic client registration (a public client: PKCE only) ->
// authorization request (PKCE S256, resource). The provider's redirectToAuthorization is the
// browser: it GETs the authorization URL, follows the redirects to the sign-in page, posts
// username, password and the page's csrf, follows to the consent page, posts decision=allow and
// its csrf, and reads the code from the Location back to the redirect URI (never contacted).
// finishAuth(code) -> token request -> connect -> tools/list, tools/call. Then the stored access
// token is spoiled (the refresh token kept): the next call gets 401, the SDK refreshes (grant
// refresh_token, with the resource) and retries: the call succeeds with the new token.
//
// It prints one JSON summary on stdout (with the tokens: test credentials of a throwaway
// gateway, for the Go test's own checks) and exits 0 only if every check passed. It must stand
// next to the node_modules it imports.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { InMemoryOAuthClientProvider } from "@modelcontextprotocol/sdk/examples/client/simpleOAuthClientProvider.js";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    url: { type: "string" },
    user: { type: "string" },
    password: { type: "string" },
    tool: { type: "string", default: "test_simple_text" },
    args: { type: "string", default: "{}" },
    expect: { type: "string", default: "simple text response" },
  },
});
if (!opts.url || !opts.user || !opts.password) {
  console.error("usage: oauth_walk.mjs --url URL --user NAME --password PASSWORD [--tool NAME --args JSON --expect TEXT]");
  process.exit(2);
}
const serverUrl = new URL(opts.url);
const redirectUrl = "http://127.0.0.1:7778/callback";

const summary = {
  ok: false,
  flow: [], // every HTTP request of the SDK and of the "browser": method, url, status
  registration: null, // what the SDK registered (request) and got (client_id, auth method)
  authorization: null, // the authorization request's parameters
  pages: [], // the browser's hops
  tokenRequests: [], // grant_type, resource, whether a code_verifier was sent
  clientId: null,
  first: null, // tokens of the authorization
  second: null, // tokens after the refresh
  calls: [],
  errors: [],
};
const fail = (msg) => summary.errors.push(msg);

async function recordingFetch(input, init = {}) {
  const url = new URL(input instanceof Request ? input.url : String(input));
  const method = (init.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase();
  const entry = { method, url: url.href };
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  entry.bearer = /^bearer /i.test(headers.get("authorization") ?? "");
  if (url.pathname.endsWith("/oauth/token") && init.body) {
    const p = new URLSearchParams(String(init.body));
    summary.tokenRequests.push({
      grantType: p.get("grant_type"),
      resource: p.get("resource"),
      codeVerifier: p.has("code_verifier"),
      clientSecret: p.has("client_secret") || /^basic /i.test(headers.get("authorization") ?? ""),
    });
  }
  if (url.pathname.endsWith("/oauth/register") && init.body) {
    summary.registration = { request: JSON.parse(String(init.body)) };
  }
  summary.flow.push(entry);
  const res = await fetch(input, init);
  entry.status = res.status;
  if (url.pathname.endsWith("/oauth/register") && res.ok) {
    const body = await res.clone().json();
    summary.registration.clientId = body.client_id;
    summary.registration.authMethod = body.token_endpoint_auth_method;
    summary.registration.secret = Boolean(body.client_secret);
  }
  return res;
}

// Browser is a user agent without JavaScript: it keeps cookies per origin and follows
// redirects by hand.
class Browser {
  cookies = new Map(); // origin -> Map(name -> value)

  async fetch(url, init = {}) {
    const u = new URL(url);
    const jar = this.cookies.get(u.origin) ?? new Map();
    const headers = new Headers(init.headers);
    if (jar.size > 0) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
    const res = await fetch(u, { ...init, headers, redirect: "manual" });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const i = pair.indexOf("=");
      jar.set(pair.slice(0, i).trim(), pair.slice(i + 1).trim());
    }
    this.cookies.set(u.origin, jar);
    const location = res.headers.get("location");
    const hop = { method: init.method ?? "GET", url: u.origin + u.pathname, status: res.status };
    summary.pages.push(hop);
    return { res, body: await res.text(), location: location ? new URL(location, u) : null };
  }

  // open GETs url and follows redirects while they stay on origin.
  async open(url, origin) {
    let r = await this.fetch(url);
    for (let hops = 0; r.location && r.res.status >= 300 && r.res.status < 400; hops++) {
      if (hops === 10 || r.location.origin !== origin) return r;
      r = await this.fetch(r.location);
    }
    return r;
  }

  post(action, fields, origin) {
    return this.fetch(action, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin },
      body: new URLSearchParams(fields).toString(),
    });
  }
}

// formOf finds the POST form whose action's path ends in suffix, and its csrf field.
function formOf(body, base, suffix) {
  const unescape = (s) =>
    s.replace(/&amp;/g, "&").replace(/&#43;/g, "+").replace(/&#39;/g, "'").replace(/&#34;/g, '"').replace(/&quot;/g, '"').replace(/&lt;/g, "<").replace(/&gt;/g, ">");
  const attr = (tag, name) => {
    const m = new RegExp(`\\b${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)'|([^\\s"'>]+))`, "i").exec(tag);
    return m ? unescape(m[1] ?? m[2] ?? m[3]) : undefined;
  };
  for (const f of body.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)) {
    if ((attr(f[1], "method") ?? "").toLowerCase() !== "post") continue;
    const action = new URL(attr(f[1], "action") ?? "", base);
    if (!action.pathname.endsWith(suffix)) continue;
    for (const input of f[2].matchAll(/<input\b([^>]*)>/gi)) {
      if (attr(input[1], "name") === "csrf") return { action, csrf: attr(input[1], "value") };
    }
  }
  return null;
}

// WalkingProvider signs in and consents on the gateway's pages when the SDK sends the user to
// authorize, and keeps the code for finishAuth.
class WalkingProvider extends InMemoryOAuthClientProvider {
  code = undefined;

  async redirectToAuthorization(authorizationUrl) {
    summary.authorization = Object.fromEntries(authorizationUrl.searchParams);
    const issuer = authorizationUrl.origin;
    const browser = new Browser();
    const login = await browser.open(authorizationUrl, issuer);
    const lf = formOf(login.body, login.res.url || authorizationUrl, "/oauth/login");
    if (login.res.status !== 200 || !lf) return fail(`sign-in page: ${login.res.status}, no login form: ${login.body.slice(0, 300)}`);
    const signedIn = await browser.post(lf.action, { csrf: lf.csrf, username: opts.user, password: opts.password }, issuer);
    if (signedIn.res.status !== 303 || !signedIn.location) return fail(`sign-in: ${signedIn.res.status}, want 303: ${signedIn.body.slice(0, 300)}`);
    const consent = await browser.open(signedIn.location, issuer);
    const cf = formOf(consent.body, signedIn.location, "/oauth/consent");
    if (consent.res.status !== 200 || !cf) return fail(`consent page: ${consent.res.status}, no consent form: ${consent.body.slice(0, 300)}`);
    const allowed = await browser.post(cf.action, { csrf: cf.csrf, decision: "allow" }, issuer);
    const to = allowed.location;
    if (allowed.res.status !== 303 || !to) return fail(`consent: ${allowed.res.status}, want 303 to the client: ${allowed.body.slice(0, 300)}`);
    if (to.origin + to.pathname !== redirectUrl) fail(`redirect to ${to.origin + to.pathname}, want ${redirectUrl}`);
    if (to.searchParams.get("state") !== (summary.authorization.state ?? null)) fail(`redirect state ${to.searchParams.get("state")}, want ${summary.authorization.state}`);
    if (to.searchParams.get("iss") !== issuer) fail(`redirect iss ${to.searchParams.get("iss")}, want ${issuer} (RFC 9207)`);
    this.code = to.searchParams.get("code") ?? undefined;
    if (!this.code) fail(`redirect without a code: ${to}`);
  }
}

async function call(client, label) {
  const result = await client.callTool({ name: opts.tool, arguments: JSON.parse(opts.args) });
  const text = (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  summary.calls.push({ label, isError: Boolean(result.isError), text });
  if (result.isError || !text.includes(opts.expect)) fail(`${label} ${opts.tool}: ${JSON.stringify(result)}, want text containing ${JSON.stringify(opts.expect)}`);
}

async function main() {
  const provider = new WalkingProvider(redirectUrl, {
    client_name: "mcpgate-e2e-sdk",
    redirect_uris: [redirectUrl],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
  });
  const probe = new Client({ name: "mcpgate-e2e-sdk", version: "1.0.0" });
  const first = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: recordingFetch });
  try {
    await probe.connect(first);
    return fail("connected without authorization: the gateway did not ask for a token");
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) return fail(`first connect: ${err?.message ?? err}, want UnauthorizedError`);
  }
  if (!provider.code) return summary.errors.length ? undefined : fail("no code captured");
  await first.finishAuth(provider.code);
  const t1 = provider.tokens();
  summary.clientId = provider.clientInformation()?.client_id ?? null;
  summary.first = { access: t1?.access_token ?? null, refresh: t1?.refresh_token ?? null, expiresIn: t1?.expires_in ?? null, scope: t1?.scope ?? null };
  if (!t1?.access_token || !t1?.refresh_token) return fail(`tokens after finishAuth: ${JSON.stringify(t1)}`);

  const transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: recordingFetch });
  const client = new Client({ name: "mcpgate-e2e-sdk", version: "1.0.0" });
  let closing = false;
  client.onerror = (err) => {
    if (!closing) fail(`client error: ${err?.message ?? err}`);
  };
  try {
    await client.connect(transport);
    const { tools } = await client.listTools();
    if (!tools.some((t) => t.name === opts.tool)) fail(`tools/list has no ${opts.tool}`);
    await call(client, "before refresh");

    // Spoil the access token, keep the refresh token: the gateway answers 401, and the SDK
    // refreshes and retries, as it does when a token expires.
    // (A character well inside the signature: the last one may hold only padding bits.)
    const at = t1.access_token, i = at.length - 10;
    provider.saveTokens({ ...provider.tokens(), access_token: at.slice(0, i) + (at[i] === "A" ? "B" : "A") + at.slice(i + 1) });
    const refreshesBefore = summary.tokenRequests.filter((r) => r.grantType === "refresh_token").length;
    await call(client, "after refresh");
    const t2 = provider.tokens();
    summary.second = { access: t2?.access_token ?? null, refresh: t2?.refresh_token ?? null };
    if (summary.tokenRequests.filter((r) => r.grantType === "refresh_token").length !== refreshesBefore + 1) fail("the SDK did not refresh once");
    if (!t2?.access_token || t2.access_token === t1.access_token) fail("no new access token after the refresh");
    if (!t2?.refresh_token || t2.refresh_token === t1.refresh_token) fail("the refresh token did not rotate");
  } finally {
    closing = true;
    await client.close().catch(() => {});
  }
}

try {
  await main();
} catch (err) {
  fail(`unexpected: ${err?.stack ?? err}`);
}
summary.ok = summary.errors.length === 0;
console.log(JSON.stringify(summary));
process.exit(summary.ok ? 0 : 1);
