--[[
  Renews an event-stream slot's lease (each heartbeat), and the set's expiry with it, or a
  long-lived stream would stop counting. A slot that went (Redis away past the lease, a restart or
  a failover: see stream_slot.lua) is added back: an open stream always counts, even over the cap
  it was opened under.

  KEYS[1] open streams (zset: stream id -> lease deadline)   tl:api:streams:{<tenant>}
  ARGV[1] stream id  ARGV[2] lease deadline (ms)  ARGV[3] lease (ms): the set's expiry

  Returns 1. Kept in memory only, as stream_slot.lua.
]]
redis.set_repl(redis.REPL_NONE)
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
