--[[
  Releases an event-stream slot when its stream ends.

  KEYS[1] open streams (zset)   tl:api:streams:{<tenant>}
  ARGV[1] stream id

  Returns 1 when the slot was there, 0 otherwise. Kept in memory only, as stream_slot.lua.
]]
redis.set_repl(redis.REPL_NONE)
return redis.call('ZREM', KEYS[1], ARGV[1])
