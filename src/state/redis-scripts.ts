/**
 * Lua scripts of the Redis store. Each runs atomically on the Redis server and takes "now" from the
 * server's own clock (TIME), so replicas with skewed clocks still share one consistent allowance.
 * The arithmetic is the same as state/gcra.ts (which the in-memory store uses).
 */

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
