/**
 * Lua scripts of the Redis store. Each runs atomically on the Redis server and takes "now" from the
 * server's own clock (TIME), so replicas with skewed clocks still share one consistent allowance.
 * The arithmetic is the same as limits/gcra.ts (which the in-memory store uses).
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * KEYS: requests TAT, tokens TAT, leases (sorted set: lease id → expiry), budget spend (nano-USD).
 * ARGV: rpm|'', tpm|'', tokens, count request 0|1, max concurrent|'', lease id, lease ttl ms,
 *       budget nano-USD|'', window ms.
 * Returns: allowed 0|1, refused limit|'', retry-after ms (-1: never), requests remaining, requests
 *          reset ms, tokens remaining, tokens reset ms, spent nano-USD.
 */
export const ADMIT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[9])
local EPS = 1e-6
local function gcra(key, limit, cost)
  local tat = tonumber(redis.call('GET', key)) or 0
  local interval = window / limit
  local base = math.max(tat, now)
  local level = base - now
  local after = level + cost * interval
  if after > window + EPS then
    local retry = after - window
    if cost * interval > window + EPS then retry = -1 end
    return false, tat, math.max(0, math.floor((window - level) / interval + EPS)), level, retry
  end
  return true, base + cost * interval, math.max(0, math.floor((window - after) / interval + EPS)), after, 0
end
local refused = ''
local retry = 0
local spent = 0
if ARGV[8] ~= '' then
  spent = tonumber(redis.call('GET', KEYS[4])) or 0
  if spent >= tonumber(ARGV[8]) then refused = 'budget' end
end
if ARGV[5] ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then
    if refused == '' then refused = 'concurrency' end
    if retry == 0 then retry = 1000 end
  end
end
local rqOk, rqTat, rqRem, rqReset, rqRetry = true, 0, 0, 0, 0
if ARGV[1] ~= '' then
  rqOk, rqTat, rqRem, rqReset, rqRetry = gcra(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[4]))
  if not rqOk then
    if refused == '' then refused = 'requests' end
    if retry == 0 then retry = rqRetry end
  end
end
local tkOk, tkTat, tkRem, tkReset, tkRetry = true, 0, 0, 0, 0
if ARGV[2] ~= '' then
  tkOk, tkTat, tkRem, tkReset, tkRetry = gcra(KEYS[2], tonumber(ARGV[2]), tonumber(ARGV[3]))
  if not tkOk then
    if refused == '' then refused = 'tokens' end
    if retry == 0 then retry = tkRetry end
  end
end
if refused ~= '' then
  if ARGV[1] ~= '' and rqOk and ARGV[4] == '1' then rqRem = rqRem + 1 end
  if ARGV[2] ~= '' and tkOk and tonumber(ARGV[3]) > 0 then
    local _ok, _tat, rem, reset = gcra(KEYS[2], tonumber(ARGV[2]), 0)
    tkRem, tkReset = rem, reset
  end
  if retry < 0 then retry = -1 else retry = math.ceil(retry) end
  return {0, refused, retry, rqRem, math.ceil(rqReset), tkRem, math.ceil(tkReset), spent}
end
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], string.format('%.3f', rqTat), 'PX', math.max(1, math.ceil(rqTat - now)) + 1000)
end
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[2], string.format('%.3f', tkTat), 'PX', math.max(1, math.ceil(tkTat - now)) + 1000)
end
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[7]), ARGV[6])
  redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[7]))
end
return {1, '', 0, rqRem, math.ceil(rqReset), tkRem, math.ceil(tkReset), spent}
`;

/**
 * KEYS: tokens TAT, budget spend. ARGV: tpm|'', token delta, window ms, spend nano-USD, spend ttl ms.
 */
export const SETTLE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] ~= '' and tonumber(ARGV[2]) ~= 0 then
  local tat = tonumber(redis.call('GET', KEYS[1])) or 0
  local nxt = math.max(tat, now) + tonumber(ARGV[2]) * (tonumber(ARGV[3]) / tonumber(ARGV[1]))
  if nxt < now then nxt = now end
  redis.call('SET', KEYS[1], string.format('%.3f', nxt), 'PX', math.max(1, math.ceil(nxt - now)) + 1000)
end
if tonumber(ARGV[4]) > 0 then
  redis.call('INCRBY', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
return 1
`;

/** KEYS: leases. ARGV: lease ttl ms, lease ids… — pushes the expiry of leases that still exist. */
export const REFRESH = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
return 1
`;

/**
 * The shared breaker and latency score of one target (state/health/shared-health.ts has the rules and the
 * TypeScript twin the memory store runs).
 * KEYS: health hash, probe lease. ARGV: failure rate, min requests, window ms, consecutive failures,
 *       open ms, max open ms, alpha, penalty ms, lease ms, key ttl ms, owner, then events as triples
 *       (kind, total ms or for `s` the run's count|'', ttft ms|'').
 * Returns: state (0 closed, 1 open, 2 half-open), remaining ms, open ms, ok, fail, probe (0 none,
 *          1 mine, 2 other), total, ttft ('' when unknown), samples, age ms (-1 when none).
 */
export const HEALTH = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local H, P = KEYS[1], KEYS[2]
local rate, minreq, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local consec, open0, maxopen = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local alpha, penalty, leasems, ttl, owner = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), ARGV[11]
local width = window / 10
local raw = redis.call('HGETALL', H)
local h = {}
for i = 1, #raw, 2 do h[raw[i]] = raw[i + 1] end
local until_ = tonumber(h['until'] or '0')
local openms = tonumber(h['ms'] or open0)
local cons = tonumber(h['cons'] or '0')
local total = tonumber(h['lt'] or '')
local ttft = tonumber(h['lf'] or '')
local samples = tonumber(h['ln'] or '0')
local observed = tonumber(h['la'] or '')
local buckets = {}
for k, v in pairs(h) do
  local kind, n = string.match(k, '^([of]):(%-?%d+)$')
  if kind then
    n = tonumber(n)
    buckets[n] = buckets[n] or {0, 0}
    if kind == 'o' then buckets[n][1] = tonumber(v) else buckets[n][2] = tonumber(v) end
  end
end
local dirty = false
local leaseOwner = redis.call('GET', P)
local function clearBuckets()
  for n, _ in pairs(buckets) do redis.call('HDEL', H, 'o:' .. n, 'f:' .. n) end
  buckets = {}
end
local function totals()
  local ok, fail = 0, 0
  for n, b in pairs(buckets) do
    if (n + 1) * width <= now - window then
      redis.call('HDEL', H, 'o:' .. n, 'f:' .. n)
      buckets[n] = nil
    else
      ok = ok + b[1]
      fail = fail + b[2]
    end
  end
  return ok, fail
end
local function open(ms)
  until_ = now + ms
  openms = ms
  cons = 0
  clearBuckets()
  redis.call('DEL', P)
  leaseOwner = false
  dirty = true
end
local function close()
  until_ = 0
  openms = open0
  cons = 0
  clearBuckets()
  redis.call('DEL', P)
  leaseOwner = false
  dirty = true
end
local function bump(i, by)
  local n = math.floor(now / width)
  buckets[n] = buckets[n] or {0, 0}
  buckets[n][i] = buckets[n][i] + by
  redis.call('HINCRBY', H, (i == 1 and 'o:' or 'f:') .. n, by)
end
local function ewma(v, x)
  if v == nil then return x end
  return v + alpha * (x - v)
end
local function halfOpen() return until_ > 0 and now >= until_ end
for i = 12, #ARGV, 3 do
  local k = ARGV[i]
  if k == 's' then
    if until_ == 0 then bump(1, tonumber(ARGV[i + 1]) or 1); cons = 0; dirty = true end
  elseif k == 'f' then
    if until_ == 0 then
      bump(2, 1); cons = cons + 1; dirty = true
      if consec > 0 and cons >= consec then
        open(open0)
      else
        local ok, fail = totals()
        if ok + fail >= minreq and fail / (ok + fail) >= rate then open(open0) end
      end
    end
  elseif k == 'l' then
    total = ewma(total, tonumber(ARGV[i + 1]))
    if ARGV[i + 2] ~= '' then ttft = ewma(ttft, tonumber(ARGV[i + 2])) end
    samples = samples + 1; observed = now; dirty = true
  elseif k == 'p' then
    total = ewma(total, math.max(penalty, 2 * (total or 0)))
    if ttft ~= nil then ttft = ewma(ttft, math.max(penalty, 2 * ttft)) end
    samples = samples + 1; observed = now; dirty = true
  elseif k == 'A' then
    if halfOpen() and not leaseOwner then
      redis.call('SET', P, owner, 'PX', leasems)
      leaseOwner = owner
    end
  elseif k == 'R' then
    if leaseOwner == owner then redis.call('PEXPIRE', P, leasems) end
  elseif k == 'X' or k == 'N' then
    if leaseOwner == owner then redis.call('DEL', P); leaseOwner = false end
  elseif k == 'S' or k == 'F' then
    if halfOpen() and (not leaseOwner or leaseOwner == owner) then
      if k == 'S' then close() else open(math.min(openms * 2, maxopen)) end
    end
  end
end
if dirty then
  redis.call('HSET', H, 'until', until_, 'ms', openms, 'cons', cons, 'ln', samples)
  if total ~= nil then redis.call('HSET', H, 'lt', string.format('%.3f', total)) end
  if ttft ~= nil then redis.call('HSET', H, 'lf', string.format('%.3f', ttft)) end
  if observed ~= nil then redis.call('HSET', H, 'la', observed) end
  redis.call('PEXPIRE', H, ttl)
end
local ok, fail = totals()
local state, remaining = 0, 0
if until_ > 0 then
  if now < until_ then state = 1; remaining = until_ - now else state = 2 end
end
local probe = 0
if leaseOwner then
  if leaseOwner == owner then probe = 1 else probe = 2 end
end
local age = -1
if observed ~= nil then age = now - observed end
return {state, remaining, openms, ok, fail, probe, total and string.format('%.3f', total) or '', ttft and string.format('%.3f', ttft) or '', samples, age}
`;

/** A script with its SHA1 (EVALSHA, then EVAL when the server does not know it yet). */
export interface Script {
  lua: string;
  sha: string;
}
export const script = (lua: string): Script => ({ lua, sha: createHash('sha1').update(lua).digest('hex') });

/** Runs a script by its SHA1; a server that lost it (restart, SCRIPT FLUSH) gets it again with EVAL. */
export async function runScript(redis: Pick<Redis, 'evalsha' | 'eval'>, s: Script, keys: string[], args: Array<string | number>): Promise<unknown> {
  try {
    return await redis.evalsha(s.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('NOSCRIPT')) return redis.eval(s.lua, keys.length, ...keys, ...args);
    throw err;
  }
}
export const ADMIT_S = script(ADMIT);
export const SETTLE_S = script(SETTLE);
export const REFRESH_S = script(REFRESH);
export const HEALTH_S = script(HEALTH);
