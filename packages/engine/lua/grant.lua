--[[
  The leader grants offers the free slots of models it just dispatched (or found idle), so an offer
  to a model with free slots and no backlog is its own pick (enqueue.lua's fast path) instead of
  waiting for a round of dispatch.lua. Fenced by the leader's token; the grants lapse with
  ARGV[2] (a leader that died grants nothing for long). Written whole for the models named, the
  others kept (each round names the models it counted).

  KEYS[1] leader lease  KEYS[2] grants (hash: model -> free slots, `max_running`)
  ARGV[1] token  ARGV[2] how long the grants hold (ms)  ARGV[3] max running per tenant
  ARGV[4 ..] model, free slots, ...

  Returns 1, or 0 when `token` no longer leads (nothing written); a WRONGTYPE error for a KEYS[2]
  that is not a hash (nothing written either).
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
-- The first write: a KEYS[2] of the wrong type fails it, with nothing written.
redis.call('HSET', KEYS[2], 'max_running', ARGV[3], unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
