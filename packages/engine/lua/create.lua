--[[
  Persist a new task in `queued` with its first event (`response.created`), atomically.

  KEYS[1] task hash      tl:{id}:task
  KEYS[2] event stream   tl:{id}:events
  KEYS[3] channel        tl:{id}:ev
  KEYS[4] inputs hash    tl:{id}:inputs
  KEYS[5] token snapshot tl:{id}:tokens
  ARGV[1] now (ms)
  ARGV[2] '1' when the id was drawn for this create (nothing a vanished task left can be under it:
          nothing is cleared), else '0'
  ARGV[3] number of field/value pairs that follow (N)
  ARGV[4 .. 3+2N] field, value, ...
  ARGV[4+2N ..] event type, event data (JSON)

  Without its record, whatever else is kept under the id (event log, inputs, snapshot) is what a
  task that vanished left (an expiry racing its log's, an eviction): it is dropped first, so the
  new task starts its log at 1 instead of failing half-way on an XADD or replaying an old run.
  A drawn id is checked too: a create that stalled past its Idempotency-Key's hold may land after
  the retry that took the key over made (and ran) the task under that id.

  Returns {'ok', seq} or {'exists'} when the id is taken (a retried create of the same id).
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  return { 'exists' }
end
if ARGV[2] ~= '1' then
  redis.call('DEL', KEYS[2], KEYS[4], KEYS[5])
end
local now = ARGV[1]
local n = tonumber(ARGV[3])
local events = argvEvents(4 + 2 * n)
-- `side_keys` starts empty: the side keys (inputs, snapshot) written later are named there.
local fields = { 'status', 'queued', 'attempt', 0, 'seq', #events / 2, 'created_at', now, 'updated_at', now,
  'side_keys', '' }
for i = 4, 3 + 2 * n do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', KEYS[1], unpack(fields))
local seq = emitAfter(KEYS[2], KEYS[3], 0, events)
return { 'ok', seq }
