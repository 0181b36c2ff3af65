--[[
  Opens an event-stream slot under the tenant's cap. Slots are leases that each heartbeat
  renews, so the streams of a replica that died stop counting once their leases lapse.

  KEYS[1] open streams (zset: stream id -> lease deadline)   tl:api:streams:{<tenant>}
  ARGV[1] now (ms)  ARGV[2] stream id  ARGV[3] lease deadline (ms)  ARGV[4] cap

  Returns 1 when the slot is taken, 0 at the cap.

  Kept in memory only, as are its renewals and its release (stream_renew.lua,
  stream_release.lua): nothing reaches the AOF or a replica, so neither a stream's open nor its
  heartbeats wait for an fsync, and a fleet's open streams add no disk writes. A crash or a
  failover loses the slots, and each open stream's next renewal puts its own back.
]]
redis.set_repl(redis.REPL_NONE)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) - tonumber(ARGV[1]))
return 1
