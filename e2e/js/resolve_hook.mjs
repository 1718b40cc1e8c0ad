// resolve_hook.mjs makes a Node process resolve the host names of MCPGATE_E2E_RESOLVE
// ("name=address,name=address") to those addresses, for every fetch, so that a client can be
// given a public URL (https://mcp.example.com:PORT/...) and still reach a proxy on loopback: the
// URL, the Host header, TLS server name and certificate check stay those of the public name, as
// they would for a real deployment. Other names resolve as usual. Load it before the script:
//
//   NODE_OPTIONS=--import=/path/to/resolve_hook.mjs MCPGATE_E2E_RESOLVE=mcp.example.com=127.0.0.1 node client.mjs
//
// It must stand next to the node_modules it imports (undici, whose global dispatcher Node's own
// fetch uses).
import dns from "node:dns";
import { Agent, setGlobalDispatcher } from "undici";

const names = new Map(
  (process.env.MCPGATE_E2E_RESOLVE ?? "")
    .split(",")
    .filter(Boolean)
    .map((entry) => entry.split("=", 2)),
);

function lookup(hostname, options, callback) {
  const address = names.get(hostname);
  if (address === undefined) return dns.lookup(hostname, options, callback);
  const family = address.includes(":") ? 6 : 4;
  if (options?.all) callback(null, [{ address, family }]);
  else callback(null, address, family);
}

if (names.size > 0) setGlobalDispatcher(new Agent({ connect: { lookup } }));
