'use strict';
/**
 * The Lua scripts of `RedisLockStore` (lib/stores/redis/index.cjs, whose top comment says what they
 * promise; names.cjs says which Redis names a key uses): one script per store operation, each run
 * with EVALSHA and, on NOSCRIPT, once more with EVAL. Every script touches only the
 * names of one key, all in one hash slot, so each runs on Redis Cluster.
 */

const { script, MIN_TOKEN_RETENTION_MS, QUEUE_ENTRY_MS } = require('./lua.cjs');
const { PERMIT_RENEW, PERMIT_RELEASE } = require('./permit-scripts.cjs');

/*
 * ACQUIRE. KEYS: lease, token, queue, waiters. ARGV: owner, ttl ms, '1' when the caller
 * is an engine on a store that grants on release, and only when the store can take
 * grants now: its grant channel and its hand-off ms. (Every argument costs the client
 * and the server time on every call: what the script can work out is not sent.)
 * Held, for a caller that waits: when the lease is this very owner's (a release handed
 * it over and the message was lost or is late) its token, with the lease counted again
 * from now, so that the caller, which counts it from when it sent this try, never
 * believes in it longer than Redis does; otherwise the owner is queued (or its entry
 * refreshed, keeping its place and its waiting time) when a channel is given; without
 * one (the last try at the caller's deadline) it leaves the queue, so that no release
 * hands the key to a waiter that gives up. Held for anyone else: false. A waiting
 * caller that takes the key leaves the queue, and, while others are queued, starts its
 * store's turn (see GRANT_FIRST) unless the turn is that store's already or another
 * store's turn began less than ARGV[5] (its hand-off ms) ago: a store that takes the
 * key within another's turn does not start a turn of its own, so stores trading the
 * key between them cannot keep a third waiting.
 * Free means "the lease key does not exist": Redis expiry decides liveness. A lease that
 * is a hash is a key held with permits (permit-scripts.cjs): the answer is minus its
 * limit (the TYPE that tells is the check for existence a free key needs anyway).
 * token = max(stored token + 1, server time in microseconds). The stored token keeps the
 * sequence increasing however fast a key is re-acquired; TIME keeps it increasing when
 * the stored token is gone: after a restart that lost the data, or after the token key
 * lapsed. TIME in microseconds is below 2^53 until the year 2255, so it is exact both
 * as a Lua number and as a JS number.
 * The token key expires `retention` ms after the last acquire (max(10 x ttl, 60 s)),
 * so the keyspace stays bounded by the keys locked recently, not by every key ever
 * locked. Once it lapses, TIME has moved past every token issued for the key (a token
 * runs ahead of TIME only by the few microseconds of same-microsecond acquires, or by a
 * backward step of the server clock shorter than the retention).
 * The token is written before the lease: if a write fails, a token is skipped, but
 * a lease never exists without its token having been stored.
 * `redis.replicate_commands()` lets Redis 3.2-4.x write after TIME; a no-op from 5 on.
 */
const ACQUIRE = script(`if redis.replicate_commands then redis.replicate_commands() end
local asked = ARGV[3] == '1'
local channel = ARGV[4] or ''
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'none' then
  local limit = kind == 'hash' and redis.call('HGET', KEYS[1], '')
  if limit then
    return -tonumber(limit)
  end
  if not asked then
    return false
  end
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    local granted = redis.call('GET', KEYS[2])
    if granted then
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
      return tonumber(granted)
    end
    return false
  end
  if channel == '' then
    if redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then
      redis.call('LREM', KEYS[3], 1, ARGV[1])
    end
    return false
  end
  local now = redis.call('TIME')
  local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local since = now_ms
  local old = redis.call('HGET', KEYS[4], ARGV[1])
  if old then
    since = tonumber(string.match(old, '^%d+ %d+ (%d+) ')) or now_ms
  end
  local entry = string.format('%.0f %s %.0f ', now_ms + ${QUEUE_ENTRY_MS}, ARGV[2], since) .. channel
  if redis.call('HSET', KEYS[4], ARGV[1], entry) == 1 then
    redis.call('RPUSH', KEYS[3], ARGV[1])
  end
  redis.call('PEXPIRE', KEYS[3], ${QUEUE_ENTRY_MS})
  redis.call('PEXPIRE', KEYS[4], ${QUEUE_ENTRY_MS})
  return false
end
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
local stored = redis.call('GET', KEYS[2])
if stored then
  stored = tonumber(stored)
  if stored and stored >= token then
    token = stored + 1
  end
end
local retention = math.max(${MIN_TOKEN_RETENTION_MS}, tonumber(ARGV[2]) * 10)
redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', string.format('%.0f', retention))
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if asked and redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then
  redis.call('LREM', KEYS[3], 1, ARGV[1])
end
if channel ~= '' and redis.call('EXISTS', KEYS[3]) == 1 then
  local now_ms = math.floor(tonumber(now[1]) * 1000 + tonumber(now[2]) / 1000)
  local slice = redis.call('HGET', KEYS[4], '')
  local since, turn
  if slice then
    since, turn = string.match(slice, '^(%d+) (.*)$')
  end
  if turn ~= channel and (not since or now_ms - tonumber(since) >= tonumber(ARGV[5])) then
    redis.call('HSET', KEYS[4], '', string.format('%.0f ', now_ms) .. channel)
  end
end
return token
`);

/*
 * Raising a key's token floor: RAISE_FLOOR(token) keeps the token key at least `token`,
 * the largest token its holder's process handed over locally, so that the next grant
 * (stored token + 1 or more) is larger than all of them. Kept as long as a grant keeps
 * it, at least.
 */
const RAISE_FLOOR = `local function raise_floor(carried)
  local stored = tonumber(redis.call('GET', KEYS[2]))
  if carried and (not stored or stored < carried) then
    local retention = math.max(${MIN_TOKEN_RETENTION_MS}, redis.call('PTTL', KEYS[2]))
    redis.call('SET', KEYS[2], string.format('%.0f', carried), 'PX', string.format('%.0f', retention))
  end
end
`;

/*
 * RENEW. KEYS: lease, and the token key when ARGV[3] is given. ARGV: owner, ttl ms, and
 * the holder's token when its process hands leases over locally (see RAISE_FLOOR).
 * 1 when the live lease is the owner's. A lease that is a hash (GET fails on it) is
 * a key held with permits: the owner's permit is renewed (permit-scripts.cjs).
 */
const RENEW = script(`${RAISE_FLOOR}
local held = redis.pcall('GET', KEYS[1])
if type(held) == 'table' then
  ${PERMIT_RENEW}
  return permit_renew(held)
end
if ARGV[3] then
  raise_floor(tonumber(ARGV[3]))
end
if held == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`);

/*
 * Handing a free or released lease to the first queued owner: GRANT_FIRST(now_us,
 * starving_ms, releasing, check, holder_channel) drops stale entries (not refreshed in
 * time, or the releasing owner's own) from the head of the queue; when the first live
 * owner has waited at least `starving_ms`, and the store on `holder_channel` has had
 * the key that long (its turn, recorded under the waiters hash's field '' as
 * "<since ms> <channel>" by a grant, or by an ACQUIRE while owners were queued), it gets
 * the lease: a new token (as in ACQUIRE), a lease of the ttl it asked for, the turn,
 * and a message on its store's channel:
 *   "<token> <owner length in bytes> <owner><lease name>"
 * With `check`, a message that reached no subscriber (that store closed, or its process
 * is gone) takes the lease back and the next owner is tried; Redis Cluster counts only
 * the subscribers of one node, so cluster stores do not check. Returns 1 when it
 * granted, 2 when live owners wait but none long enough, 0 when none waits.
 */
const GRANT_FIRST = `local function grant_first(now_us, starving_ms, releasing, check, holder_channel)
  local now_ms = math.floor(now_us / 1000)
  local slice_fresh = false
  if starving_ms > 0 and holder_channel ~= '' then
    local slice = redis.call('HGET', KEYS[4], '')
    if slice then
      local slice_since, slice_channel = string.match(slice, '^(%d+) (.*)$')
      slice_fresh = slice_channel == holder_channel and now_ms - tonumber(slice_since) < starving_ms
    end
  end
  while true do
    local owner = redis.call('LINDEX', KEYS[3], 0)
    if not owner then
      return 0
    end
    local entry = redis.call('HGET', KEYS[4], owner)
    local until_ms, ttl, since, channel
    if entry then
      until_ms, ttl, since, channel = string.match(entry, '^(%d+) (%d+) (%d+) (.*)$')
    end
    if owner ~= releasing and until_ms and tonumber(until_ms) > now_ms then
      if slice_fresh or now_ms - tonumber(since) < starving_ms then
        return 2
      end
      redis.call('LPOP', KEYS[3])
      redis.call('HDEL', KEYS[4], owner)
      local token = now_us
      local stored = tonumber(redis.call('GET', KEYS[2]))
      if stored and stored >= token then
        token = stored + 1
      end
      local retention = math.max(${MIN_TOKEN_RETENTION_MS}, tonumber(ttl) * 10)
      redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', string.format('%.0f', retention))
      redis.call('SET', KEYS[1], owner, 'PX', ttl)
      local heard = redis.call('PUBLISH', channel, string.format('%.0f %d ', token, #owner) .. owner .. KEYS[1])
      if heard > 0 or not check then
        redis.call('HSET', KEYS[4], '', string.format('%.0f ', now_ms) .. channel)
        if redis.call('PTTL', KEYS[4]) < 0 then
          redis.call('PEXPIRE', KEYS[4], ${QUEUE_ENTRY_MS})
        end
        return 1
      end
      redis.call('DEL', KEYS[1])
    else
      redis.call('LPOP', KEYS[3])
      redis.call('HDEL', KEYS[4], owner)
    end
  end
end
`;

/*
 * RELEASE. KEYS: lease, token, queue, waiters. (A lease that is a hash, which GET fails
 * on, is a key held with permits: permit-scripts.cjs releases the owner's permit.) ARGV: owner, the holder's token when its
 * process hands leases over locally as ARGV[3] (see RAISE_FLOOR, whatever the lease's
 * state), and the releasing store's settings, read only when owners are queued: "<hand-off ms> <1 to check that a grant's
 * message was heard (see GRANT_FIRST), else 0> <its grant channel>" (the channel empty
 * when the store has none: its turn is not counted). The release is announced on the
 * lease's name + ':released'.
 * Only the owner's live lease is released (0 otherwise). An owner that does not hold the
 * lease leaves the queue instead: a waiter that gave up (its engine releases it then), so
 * that no release hands the key to it. A queued owner that has waited
 * at least the hand-off time, at the end of the releasing store's turn, is handed the
 * lease (1). Otherwise the lease is deleted:
 * 2 when owners are queued (the releasing store wakes the first one unless it takes the
 * key again at once, see `#wakeLease`), 1 when nobody is queued, after announcing the
 * release on the key's channel.
 */
const RELEASE = script(`if redis.replicate_commands then redis.replicate_commands() end
${RAISE_FLOOR}
if ARGV[3] then
  raise_floor(tonumber(ARGV[3]))
end
local held = redis.pcall('GET', KEYS[1])
if type(held) == 'table' then
  -- The permit functions are made only here: a plain lease's release pays nothing for them.
  ${PERMIT_RELEASE}
  return permit_release(held, string.match(ARGV[2], '^%d+ (%d) ') == '1')
end
if held ~= ARGV[1] then
  if redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then
    redis.call('LREM', KEYS[3], 1, ARGV[1])
  end
  return 0
end
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1] .. ':released', 'released')
  return 1
end
${GRANT_FIRST}
local hand_off, check, holder = string.match(ARGV[2], '^(%d+) (%d) (.*)$')
local now = redis.call('TIME')
local granted = grant_first(tonumber(now[1]) * 1000000 + tonumber(now[2]), tonumber(hand_off), ARGV[1], check == '1', holder)
if granted == 1 then
  return 1
end
redis.call('DEL', KEYS[1])
if granted == 2 then
  return 2
end
redis.call('PUBLISH', KEYS[1] .. ':released', 'released')
return 1
`);

/*
 * WAKE. KEYS: lease, token, queue, waiters. ARGV: '1' to check that the grant's message
 * was heard (see GRANT_FIRST). The key was released with owners queued and the
 * releasing store did not take it again: if it is still free, the first queued owner
 * gets it now, however long it has waited (1); when none is left, the release is
 * announced on the lease's name + ':released' (as RELEASE does), for waiters not queued
 * yet.
 */
const WAKE = script(`if redis.replicate_commands then redis.replicate_commands() end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
${GRANT_FIRST}
local now = redis.call('TIME')
if grant_first(tonumber(now[1]) * 1000000 + tonumber(now[2]), 0, '', ARGV[1] == '1', '') == 1 then
  return 1
end
redis.call('PUBLISH', KEYS[1] .. ':released', 'released')
return 0
`);

/* DEQUEUE. KEYS: queue, waiters. ARGV: owner. Takes the owner out of the key's queue. */
const DEQUEUE = script(`if redis.call('HDEL', KEYS[2], ARGV[1]) == 1 then
  redis.call('LREM', KEYS[1], 1, ARGV[1])
end
return 0
`);

module.exports = { script, ACQUIRE, RENEW, RELEASE, WAKE, DEQUEUE };
