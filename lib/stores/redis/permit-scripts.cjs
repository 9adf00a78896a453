'use strict';
/**
 * The Lua of `RedisLockStore`'s keys held with permits (README, "Limits and shared
 * reads"; the store protocol in lib/common/permits.cjs). A key held with permits keeps
 * its lease name, as a hash instead of a string, so a plain script notices it by the
 * type it already reads:
 *   lease  hash: '' -> the key's limit; owner -> "<expiry ms> <weight> <token>" per holder
 *   token, queue, waiters: as for a plain lease (index.cjs), a waiter's entry being
 *          "<valid until> <ttl> <queued since> <weight> <channel>"
 * What must hold, every script being atomic on the key's slot:
 * - A holder is live while its expiry (server clock) is ahead; lapsed holders are dropped
 *   before anything is counted, and their permits return.
 * - The hash lives (PEXPIRE) exactly as long as its latest live holder or its queue (the
 *   queue key lives at least as long as its last entry): while it exists, the key has one
 *   limit, and a plain acquire, finding a hash, is answered with it.
 * - Permits are handed from the head of the queue while each fits; a live head that does
 *   not fit stops it, so a heavy or exclusive waiter is never overtaken.
 * - Tokens come from the key's one counter, as for plain leases: max(last + 1, now in µs).
 * A mismatch of limits is answered as minus the key's limit (tokens are positive).
 */

const { script, MIN_TOKEN_RETENTION_MS, QUEUE_ENTRY_MS } = require('./lua.cjs');

/*
 * The functions every permit script uses. KEYS: lease, token, queue, waiters.
 * p_now(): the server's time in ms and µs.
 * p_token(now_us, ttl): the key's next token, stored as ACQUIRE stores it.
 * p_holders(now_ms): drops lapsed holders; the permits the live ones hold, and the
 *   latest expiry among them.
 * p_hand_on(now_ms, now_us, limit, used, latest, check, caller, caller_ttl): grants the
 *   queue's live owners from the head while each fits, telling each on its store's
 *   channel ("<token> <owner length in bytes> <owner><lease name>", as GRANT_FIRST in
 *   scripts.cjs); with `check`, a grant nobody heard is taken back. `caller` (the owner
 *   of the script's own try) is answered instead of told. Stale entries are dropped.
 *   Returns used, latest, and the caller's token when it was granted.
 * p_keep(latest, now_ms): the hash lives until its latest holder's expiry or its queue's.
 */
const PERMIT_LUA = `local function p_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function p_token(now_us, ttl)
  local token = now_us
  local stored = tonumber(redis.call('GET', KEYS[2]))
  if stored and stored >= token then
    token = stored + 1
  end
  local retention = math.max(${MIN_TOKEN_RETENTION_MS}, ttl * 10)
  redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', string.format('%.0f', retention))
  return token
end
local function p_holders(now_ms)
  local used, latest = 0, 0
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    if all[i] ~= '' then
      local expiry, weight = string.match(all[i + 1], '^(%d+) (%d+) ')
      expiry = tonumber(expiry)
      if expiry and expiry > now_ms then
        used = used + tonumber(weight)
        if expiry > latest then
          latest = expiry
        end
      else
        redis.call('HDEL', KEYS[1], all[i])
      end
    end
  end
  return used, latest
end
local function p_hand_on(now_ms, now_us, limit, used, latest, check, caller, caller_ttl)
  local mine
  while true do
    local owner = redis.call('LINDEX', KEYS[3], 0)
    if not owner then
      break
    end
    local entry = redis.call('HGET', KEYS[4], owner)
    local until_ms, ttl, weight, channel
    if entry then
      until_ms, ttl, weight, channel = string.match(entry, '^(%d+) (%d+) %d+ (%d+) (.*)$')
    end
    if until_ms and tonumber(until_ms) > now_ms then
      weight = tonumber(weight)
      if used + weight > limit then
        break
      end
      if owner == caller then
        ttl = caller_ttl
      else
        ttl = tonumber(ttl)
      end
      redis.call('LPOP', KEYS[3])
      redis.call('HDEL', KEYS[4], owner)
      local token = p_token(now_us, ttl)
      local expiry = now_ms + ttl
      redis.call('HSET', KEYS[1], owner, string.format('%.0f %.0f %.0f', expiry, weight, token))
      local kept = true
      if owner == caller then
        mine = token
      elseif redis.call('PUBLISH', channel, string.format('%.0f %d ', token, #owner) .. owner .. KEYS[1]) == 0 and check then
        redis.call('HDEL', KEYS[1], owner)
        kept = false
      end
      if kept then
        used = used + weight
        if expiry > latest then
          latest = expiry
        end
      end
    else
      redis.call('LPOP', KEYS[3])
      redis.call('HDEL', KEYS[4], owner)
    end
  end
  return used, latest, mine
end
local function p_keep(latest, now_ms)
  local last = latest
  local queued = redis.call('PTTL', KEYS[3])
  if queued > 0 and now_ms + queued > last then
    last = now_ms + queued
  end
  if last > now_ms then
    redis.call('PEXPIRE', KEYS[1], string.format('%.0f', last - now_ms))
  else
    redis.call('DEL', KEYS[1])
  end
end
`;

/*
 * PERMIT_ACQUIRE. KEYS: lease, token, queue, waiters. ARGV: owner, ttl ms, '1' when the
 * caller is an engine (as ACQUIRE's), limit, weight, the store's grant channel ('' when
 * this try does not queue), '1' to check that a grant's message was heard.
 * Answers -(the key's limit) when the key is held, or waited for, with another limit (a
 * plain lease, or plain waiters on a free key: -1); the owner's token when it is granted,
 * or already holds (a caller that is an engine: a grant whose message is late), counted
 * again from now; else false, the owner queued (keeping its place) when a channel is
 * given, or taken out of the queue when an engine's try gives none (its last).
 */
const PERMIT_ACQUIRE = script(`if redis.replicate_commands then redis.replicate_commands() end
${PERMIT_LUA}
local owner, ttl, limit, weight = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local asked, channel, check = ARGV[3] == '1', ARGV[6] or '', ARGV[7] == '1'
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'string' then
  return -1
end
local now_ms, now_us = p_now()
local held
if kind == 'none' then
  -- Live entries on a free key are plain waiters (the hash outlives permit waiters).
  while true do
    local first = redis.call('LINDEX', KEYS[3], 0)
    if not first then
      break
    end
    local valid = string.match(redis.call('HGET', KEYS[4], first) or '', '^(%d+) ')
    if valid and tonumber(valid) > now_ms then
      return -1
    end
    redis.call('LPOP', KEYS[3])
    redis.call('HDEL', KEYS[4], first)
  end
  held = limit
  redis.call('HSET', KEYS[1], '', ARGV[4])
else
  held = kind == 'hash' and tonumber(redis.call('HGET', KEYS[1], ''))
  if not held then
    return redis.error_reply('WRONGTYPE the lease name of this lock key holds a ' .. kind .. ' the store did not write')
  end
end
local used, latest = p_holders(now_ms)
local mine
if held == limit then
  used, latest, mine = p_hand_on(now_ms, now_us, held, used, latest, check, owner, ttl)
else
  used, latest = p_hand_on(now_ms, now_us, held, used, latest, check, nil, ttl)
  if used > 0 or redis.call('EXISTS', KEYS[3]) == 1 then
    p_keep(latest, now_ms)
    return -held
  end
  -- Nobody holds or waits: the key takes the new limit.
  held = limit
  redis.call('HSET', KEYS[1], '', ARGV[4])
end
if mine then
  p_keep(latest, now_ms)
  return mine
end
local entry = redis.call('HGET', KEYS[1], owner)
if entry then
  if not asked then
    p_keep(latest, now_ms)
    return false
  end
  local rest = string.match(entry, '^%d+ (.*)$')
  local token = tonumber(string.match(rest, ' (%d+)$'))
  local expiry = now_ms + ttl
  redis.call('HSET', KEYS[1], owner, string.format('%.0f ', expiry) .. rest)
  if expiry > latest then
    latest = expiry
  end
  p_keep(latest, now_ms)
  return token
end
if used + weight <= limit and redis.call('EXISTS', KEYS[3]) == 0 then
  local token = p_token(now_us, ttl)
  local expiry = now_ms + ttl
  redis.call('HSET', KEYS[1], owner, string.format('%.0f %.0f %.0f', expiry, weight, token))
  if expiry > latest then
    latest = expiry
  end
  p_keep(latest, now_ms)
  return token
end
if channel ~= '' then
  local since = now_ms
  local old = redis.call('HGET', KEYS[4], owner)
  if old then
    since = tonumber(string.match(old, '^%d+ %d+ (%d+) ')) or now_ms
  end
  local line = string.format('%.0f %.0f %.0f %.0f ', now_ms + ${QUEUE_ENTRY_MS}, ttl, since, weight) .. channel
  if redis.call('HSET', KEYS[4], owner, line) == 1 then
    redis.call('RPUSH', KEYS[3], owner)
  end
  redis.call('PEXPIRE', KEYS[3], ${QUEUE_ENTRY_MS})
  redis.call('PEXPIRE', KEYS[4], ${QUEUE_ENTRY_MS})
elseif asked and redis.call('HDEL', KEYS[4], owner) == 1 then
  -- An engine's last try: it gives up, and whoever it held back may go now.
  redis.call('LREM', KEYS[3], 1, owner)
  used, latest = p_hand_on(now_ms, now_us, held, used, latest, check, nil, ttl)
end
p_keep(latest, now_ms)
return false
`);

/*
 * The permit branch of RENEW (scripts.cjs), for a lease that is a hash: the owner's live
 * permit lasts ttl from now (1), else 0. Carried tokens raise the floor as for a lease.
 * KEYS and ARGV as RENEW's; raise_floor is defined before it. A hash without the limit
 * field was not written by a store: `failed` (GET's WRONGTYPE) is the answer.
 */
const PERMIT_RENEW = `local function permit_renew(failed)
  if not redis.call('HGET', KEYS[1], '') then
    return failed
  end
  if redis.replicate_commands then redis.replicate_commands() end
  if ARGV[3] then
    raise_floor(tonumber(ARGV[3]))
  end
  local entry = redis.call('HGET', KEYS[1], ARGV[1])
  if not entry then
    return 0
  end
  local expiry, rest = string.match(entry, '^(%d+) (.*)$')
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if tonumber(expiry) <= now_ms then
    return 0
  end
  local ttl = tonumber(ARGV[2])
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f ', now_ms + ttl) .. rest)
  if redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 1
end
`;

/*
 * The permit branch of RELEASE (scripts.cjs), for a lease that is a hash: the owner's
 * permit is given back (1 when it was live, else 0) and, when nobody is left queued,
 * announced on the lease's name + ':released'; an owner holding none leaves the queue.
 * Either way the queue's head is handed what fits now. `check` as in p_hand_on; `failed` as in PERMIT_RENEW.
 */
const PERMIT_RELEASE = `${PERMIT_LUA}
local function permit_release(failed, check)
  local limit = tonumber(redis.call('HGET', KEYS[1], ''))
  if not limit then
    return failed
  end
  local now_ms, now_us = p_now()
  local entry = redis.call('HGET', KEYS[1], ARGV[1])
  local released = 0
  if entry then
    redis.call('HDEL', KEYS[1], ARGV[1])
    if tonumber(string.match(entry, '^(%d+) ')) > now_ms then
      released = 1
    end
  elseif redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then
    redis.call('LREM', KEYS[3], 1, ARGV[1])
  end
  local used, latest = p_holders(now_ms)
  used, latest = p_hand_on(now_ms, now_us, limit, used, latest, check, nil, 0)
  p_keep(latest, now_ms)
  -- Queued owners were handed what fits; only waiters not queued need telling, and only
  -- when nobody queued is left ahead of them.
  if entry and redis.call('EXISTS', KEYS[3]) == 0 then
    redis.call('PUBLISH', KEYS[1] .. ':released', 'released')
  end
  return released
end
`;

module.exports = { PERMIT_ACQUIRE, PERMIT_RENEW, PERMIT_RELEASE };
