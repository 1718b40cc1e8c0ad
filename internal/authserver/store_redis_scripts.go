package authserver

import "github.com/redis/go-redis/v9"

// The Lua scripts of the Redis store: what must happen at once across
// replicas (a code redeemed once, a refresh token rotated once, a reuse
// revoking its grant) runs inside Redis as one script. Every key a script
// touches starts with the same hash tag (ARGV[1], the prefix), so all of
// them live in one slot of a Redis Cluster; the keys built inside a
// script from ids it reads (a grant's refresh index) are under it too.
//
// The arguments every script that may revoke takes first: ARGV[1] the
// key prefix, ARGV[2] now (Unix ms, the gateway's clock), ARGV[3] until
// when a revocation is remembered (Unix ms), ARGV[4] how long the set of
// revocations outlives its newest entry (ms).

// luaRevoke is the revocation every script shares: the grant and its
// refresh token indexes go, its id joins the revoked set (scored by
// until when it matters) and is published, so that every replica's
// Revoked says so at once.
const luaRevoke = `
local function revoke(p, gid, now, untilMs, keep)
  local gk = p .. 'grant:' .. gid
  local f = redis.call('HMGET', gk, 'refresh', 'previous', 'client')
  if f[1] then redis.call('DEL', p .. 'refresh:' .. f[1]) end
  if f[2] then
    for h in string.gmatch(f[2], '%S+') do redis.call('DEL', p .. 'prev:' .. h) end
  end
  if f[3] then redis.call('SREM', p .. 'clientgrants:' .. f[3], gid) end
  redis.call('DEL', gk)
  redis.call('SREM', p .. 'grants', gid)
  redis.call('ZADD', p .. 'revoked', untilMs, gid)
  redis.call('ZREMRANGEBYSCORE', p .. 'revoked', '-inf', now)
  redis.call('PEXPIRE', p .. 'revoked', keep)
  redis.call('PUBLISH', p .. 'revoked', gid .. ' ' .. untilMs)
end
`

// luaExtend makes a set of grant ids live at least as long as the grant
// just added or refreshed, so that the set goes when its last grant
// expires unused instead of staying for good.
const luaExtend = `
local function extend(key, ttl)
  if redis.call('PTTL', key) < tonumber(ttl) then redis.call('PEXPIRE', key, ttl) end
end
`

// takeCodeScript: KEYS[1] the code. A first redemption marks it taken
// and returns {"ok", request id}; a second revokes the grant recorded for
// it and returns {"reused", its id or ""}; an unknown or expired code {"notfound"}.
var takeCodeScript = redis.NewScript(luaRevoke + `
local c = redis.call('HMGET', KEYS[1], 'request', 'taken', 'grant')
if not c[1] then return {'notfound'} end
if c[2] == '1' then
  if c[3] and c[3] ~= '' then
    revoke(ARGV[1], c[3], ARGV[2], ARGV[3], ARGV[4])
    return {'reused', c[3]}
  end
  return {'reused', ''}
end
redis.call('HSET', KEYS[1], 'taken', '1')
return {'ok', c[1]}
`)

// codeGrantScript: KEYS[1] the code, ARGV[1] the grant id. 0 when the
// code is gone.
var codeGrantScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'grant', ARGV[1])
return 1
`)

// putGrantScript: KEYS[1] the grant; after the common four, ARGV[5] its
// id, [6] its JSON, [7] its client, [8] its refresh hash (hex), [9]
// expires (Unix ms), [10] last used (Unix ms), [11] the replaced hashes
// (hex, space separated), [12] its TTL (ms). "revoked" when the grant was
// revoked meanwhile (it stays so), else "ok".
var putGrantScript = redis.NewScript(luaExtend + `
local p, now, gid = ARGV[1], tonumber(ARGV[2]), ARGV[5]
local r = redis.call('ZSCORE', p .. 'revoked', gid)
if r and tonumber(r) > now then return 'revoked' end
local old = redis.call('HMGET', KEYS[1], 'refresh', 'previous')
if old[1] then redis.call('DEL', p .. 'refresh:' .. old[1]) end
if old[2] then
  for h in string.gmatch(old[2], '%S+') do redis.call('DEL', p .. 'prev:' .. h) end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'json', ARGV[6], 'client', ARGV[7], 'refresh', ARGV[8],
  'expires', ARGV[9], 'lastUsed', ARGV[10], 'previous', ARGV[11])
redis.call('PEXPIRE', KEYS[1], ARGV[12])
redis.call('SADD', p .. 'grants', gid)
extend(p .. 'grants', ARGV[12])
redis.call('SADD', p .. 'clientgrants:' .. ARGV[7], gid)
extend(p .. 'clientgrants:' .. ARGV[7], ARGV[12])
redis.call('SET', p .. 'refresh:' .. ARGV[8], gid, 'PX', ARGV[12])
for h in string.gmatch(ARGV[11], '%S+') do
  redis.call('SET', p .. 'prev:' .. h, gid, 'PX', ARGV[12])
end
return 'ok'
`)

// rotateScript: KEYS[1] the old token's refresh index, KEYS[2] its
// replaced-token index; after the common four, ARGV[5] the old hash,
// [6] the new hash, [7] the new expiry (Unix ms), [8] the new TTL (ms),
// [9] how many replaced hashes a grant keeps. {"ok", HGETALL of the
// grant}, {"reused", grant id} (the grant revoked) or {"notfound"}.
var rotateScript = redis.NewScript(luaRevoke + luaExtend + `
local p, now = ARGV[1], tonumber(ARGV[2])
local gid = redis.call('GET', KEYS[1])
if gid then
  local gk = p .. 'grant:' .. gid
  local g = redis.call('HMGET', gk, 'refresh', 'expires', 'previous', 'client')
  if g[1] ~= ARGV[5] or tonumber(g[2]) <= now then return {'notfound'} end
  local prev = {}
  for h in string.gmatch(g[3] or '', '%S+') do table.insert(prev, h) end
  table.insert(prev, ARGV[5])
  while #prev > tonumber(ARGV[9]) do
    redis.call('DEL', p .. 'prev:' .. table.remove(prev, 1))
  end
  redis.call('HSET', gk, 'refresh', ARGV[6], 'expires', ARGV[7], 'lastUsed', ARGV[2],
    'previous', table.concat(prev, ' '))
  redis.call('PEXPIRE', gk, ARGV[8])
  extend(p .. 'grants', ARGV[8])
  if g[4] then extend(p .. 'clientgrants:' .. g[4], ARGV[8]) end
  redis.call('DEL', KEYS[1])
  redis.call('SET', p .. 'refresh:' .. ARGV[6], gid, 'PX', ARGV[8])
  for _, h in ipairs(prev) do redis.call('SET', p .. 'prev:' .. h, gid, 'PX', ARGV[8]) end
  return {'ok', redis.call('HGETALL', gk)}
end
local reused = redis.call('GET', KEYS[2])
if reused then
  revoke(p, reused, ARGV[2], ARGV[3], ARGV[4])
  return {'reused', reused}
end
return {'notfound'}
`)

// revokeScript: ARGV[5] the grant id.
var revokeScript = redis.NewScript(luaRevoke + `
revoke(ARGV[1], ARGV[5], ARGV[2], ARGV[3], ARGV[4])
return 1
`)

// deleteClientScript: KEYS[1] the client; ARGV[5] its id. Its grants
// are revoked; it returns their ids.
var deleteClientScript = redis.NewScript(luaRevoke + `
local p = ARGV[1]
redis.call('DEL', KEYS[1])
redis.call('SREM', p .. 'clients', ARGV[5])
local gids = redis.call('SMEMBERS', p .. 'clientgrants:' .. ARGV[5])
for _, gid in ipairs(gids) do
  revoke(p, gid, ARGV[2], ARGV[3], ARGV[4])
end
redis.call('DEL', p .. 'clientgrants:' .. ARGV[5])
return gids
`)
