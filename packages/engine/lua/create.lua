--[[
  Persist a new task in `queued` with its first event (`response.created`), atomically.

  KEYS[1] task hash      tl:{id}:task
  KEYS[2] event stream   tl:{id}:events
  KEYS[3] channel        tl:{id}:ev
  KEYS[4] inputs hash    tl:{id}:inputs
  KEYS[5] token snapshot tl:{id}:tokens
  KEYS[6] created mark   tl:{id}:created
  ARGV[1] now (ms)
  ARGV[2] '1' when the id was drawn for this create (nothing a vanished task left can be under it:
          nothing is cleared), else '0'
  ARGV[3] lifetime (ms) of the created mark an idempotent create leaves, '0' for none
  ARGV[4] number of field/value pairs that follow (N)
  ARGV[5 .. 4+2N] field, value, ...
  ARGV[5+2N ..] event type, event data (JSON)

  Without its record, whatever else is kept under the id (event log, inputs, snapshot) is what a
  task that vanished left (an expiry racing its log's, an eviction): it is dropped first, so the
  new task starts its log at 1 instead of failing half-way on an XADD or replaying an old run.
  A drawn id is checked too: a create that stalled past its Idempotency-Key's hold may land after
  the retry that took the key over made (and ran) the task under that id.

  An idempotent create leaves a mark beside its task that outlives it (and every Idempotency-Key
  record that can name the id): a create under an id whose mark is there and whose task is not
  (a takeover of a create that died before marking its key done, or a create that stalled past
  its hold, either after that task ran and expired) is refused, so an id never names two tasks.
  The mark is set first, in the one command that checks it: should a later write fail, the id is
  only given up, never reused.

  Returns {'ok', seq}, {'exists'} when the id is taken (a retried create of the same id), or
  {'gone'} when a task was created under it and has since expired.
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  return { 'exists' }
end
if ARGV[3] ~= '0' and not redis.call('SET', KEYS[6], ARGV[1], 'NX', 'PX', ARGV[3]) then
  return { 'gone' }
end
if ARGV[2] ~= '1' then
  redis.call('DEL', KEYS[2], KEYS[4], KEYS[5])
end
local now = ARGV[1]
local n = tonumber(ARGV[4])
local events = argvEvents(5 + 2 * n)
-- `side_keys` starts empty: the side keys (inputs, snapshot) written later are named there.
local fields = { 'status', 'queued', 'attempt', 0, 'seq', #events / 2, 'created_at', now, 'updated_at', now,
  'side_keys', '' }
local hooks = false
for i = 5, 4 + 2 * n, 2 do
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1]
  if ARGV[i] == 'hooks' then
    hooks = ARGV[i + 1]
  end
end
redis.call('HSET', KEYS[1], unpack(fields))
local seq = emitAfter(KEYS[2], KEYS[3], 0, events, hooks)
return { 'ok', seq }
