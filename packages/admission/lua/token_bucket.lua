--[[
  A tenant's request token bucket; for a create, the same step also holds a place under the
  tenant's unfinished-task cap and counts the places (one round trip instead of two).

  KEYS[1] bucket (hash: tokens, ts)        tl:api:rate:{<tenant>}
  KEYS[2] unfinished tasks (zset)          tl:api:active:{<tenant>}
  ARGV[1] refill rate (tokens/s)  ARGV[2] burst  ARGV[3] now (ms)
  ARGV[4] optional: a create's reservation id, added to KEYS[2]
  ARGV[5] with ARGV[4]: how long KEYS[2] is kept after this create (ms; see TenantLimits)

  Returns {wait_ms, count}: wait_ms > 0 means refused (and nothing reserved); count is the
  number of places in KEYS[2] after the reservation (0 without one). A KEYS[2] that is not a zset
  fails the script before its first write (no token taken without its place): the place is the
  first write, so its own WRONGTYPE is the check.

  Kept in memory only: nothing here reaches the AOF or a replica, so a request waits for no fsync
  of its own (on the way to a task's first token, one durable step fewer). A crash or a failover
  loses nothing kept: every bucket is full again, and a create writes its place to disk beside its
  task's own writes (TaskReservation.persist, with reservation_commit.lua).
]]
redis.set_repl(redis.REPL_NONE)
local rate, burst, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local at = now
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(s[1]) or burst, tonumber(s[2]) or now
if now > ts then tokens = math.min(burst, tokens + (now - ts) * rate / 1000) else now = ts end
if tokens < 1 then return {math.ceil((1 - tokens) * 1000 / rate), 0} end
if ARGV[4] ~= nil then
  -- Its error as Redis gave it: WRONGTYPE, or what the write met (OOM, READONLY: a 503 upstream).
  local placed = redis.pcall('ZADD', KEYS[2], at, ARGV[4])
  if type(placed) == 'table' and placed['err'] then
    return placed
  end
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - 1), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
if ARGV[4] == nil then return {0, 0} end
return {0, redis.call('ZCARD', KEYS[2])}
