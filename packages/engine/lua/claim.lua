--[[
  A worker takes a queued task: `queued` -> `loading`, a new attempt number and a lease.
  The attempt number fences every later write of this worker (see transition.lua, append.lua).
  A worker that has the model loaded already goes on to `running` in the same step (both events
  are written), which saves the separate start on the way to the first token.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] channel  KEYS[4] token snapshot (string)
  ARGV[1] now (ms)  ARGV[2] worker id  ARGV[3] lease (ms; its deadline is stamped by Redis's clock, see serverMs)
  ARGV[4] event type  ARGV[5] event data (JSON)
  ARGV[6] the task's attempt the job was dispatched for (DispatchJob.attempt), '' for none
  ARGV[7] this call's nonce, kept in the record as `step`
  ARGV[8] the W3C traceparent of the new attempt's span, '' when untraced: kept as
          `attempt_traceparent` for the next attempt and a restart to link to (docs/tracing.md)
  ARGV[9] event type, ARGV[10] event data (JSON) of `running`: optional, only to start at once
  ARGV[11] token ids, each followed by ',' ('' for none), ARGV[12 ..] event type, event data
          (JSON), ...: optional, with ARGV[9]: the attempt's first output, appended after the
          claim's events as append.lua would (a worker that started its model before its claim
          claims with the first delta: one durable write where there were two)

  Safe to run twice: a call whose nonce is the record's `step` is this very claim sent again (its
  reply was lost): it is answered as the claim was, with the record as it is now, instead of being
  refused as a claim of an older offer.

  A job of an older offer (a lower attempt than the task's: a second job of an offer one attempt
  took already, which later queued the task again) claims nothing: the task's current offer is in
  the ready index or has a job, and only its dispatch gives the new attempt a place in its tenant's
  running set (scored by that attempt); claimed first, the attempt would run without one.

  A new attempt of a task its clients saw `running` (field `shown`, set by the restart that
  queued it) writes neither event: to them it never stopped running (docs/engine.md, "What
  clients see").

  Returns {'ok', attempt, seq, record} | {'missing'} | {'terminal', status, tenant, parent ('' for none)}
        | {'stale', status, tenant, parent, attempt, lease} | {'illegal', status, tenant, parent, attempt, lease}
          (lease: the deadline of the lease the task holds, '' for none; all for the caller to put
          back its lease index entry, see claim_unindex.lua)
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable)
  where `record` is the task hash as this step leaves it (field, value, ...), so that the worker
  needs no read of its own.
]]
local task = KEYS[1]
local record = redis.call('HGETALL', task)
local fields = {}
for i = 1, #record, 2 do
  fields[record[i]] = record[i + 1]
end
local status, shown, hooks = fields['status'], fields['shown'], fields['hooks'] or false
if not status then
  return { 'missing' }
end
if isTerminal(status) then
  -- Whose running set a job for an ended task took a place in (see TaskStore.claim).
  return { 'terminal', status, fields['tenant'] or '', fields['parent'] or '' }
end
local attempt = tonumber(fields['attempt'] or '0')
if fields['step'] ~= nil and fields['step'] == ARGV[7] then
  return { 'ok', attempt, tonumber(fields['seq']), record }
end
local function refused(code)
  return { code, status, fields['tenant'] or '', fields['parent'] or '', attempt, fields['lease_until'] or '' }
end
if ARGV[6] ~= '' and tonumber(ARGV[6]) < attempt then
  return refused('stale')
end
if status ~= 'queued' then
  return refused('illegal')
end
local unwritable = refuseUnwritable(task, KEYS[2], nil, { fields['seq'], fields['attempt'] })
if unwritable then
  return unwritable
end
local side = nil
if ARGV[11] and ARGV[11] ~= '' then
  -- The first write, as in append.lua: a snapshot key of another type fails before anything is written.
  local appended = redis.pcall('APPEND', KEYS[4], ARGV[11])
  if type(appended) == 'table' and appended['err'] then
    return { 'corrupt', KEYS[4] .. ' is a ' .. redis.call('TYPE', KEYS[4])['ok'] .. ', not a string' }
  end
  side = withSideKey(fields['side_keys'] or false, 't')
end
local now = tonumber(ARGV[1])
-- One write of the record: the new attempt, state, lease and event counter together.
attempt = attempt + 1
local events = {}
if shown ~= 'running' then
  events = { ARGV[4], ARGV[5] }
  if ARGV[9] then
    events[3], events[4] = ARGV[9], ARGV[10]
  end
end
for i = 12, #ARGV do
  events[#events + 1] = ARGV[i]
end
local base = tonumber(fields['seq'] or '0')
local changed = {
  status = ARGV[9] and 'running' or 'loading',
  attempt = attempt,
  seq = base + #events / 2,
  updated_at = now,
  lease_owner = ARGV[2],
  lease_until = serverMs() + tonumber(ARGV[3]),
  step = ARGV[7],
  side_keys = side,
}
if ARGV[8] ~= '' then
  changed.attempt_traceparent = ARGV[8]
elseif fields['attempt_traceparent'] then
  -- An untraced attempt leaves nothing to link to: not the one before it either.
  redis.call('HDEL', task, 'attempt_traceparent')
  fields['attempt_traceparent'] = nil
end
local write = {}
for field, value in pairs(changed) do
  write[#write + 1] = field
  write[#write + 1] = value
  fields[field] = nil
end
redis.call('HSET', task, unpack(write))
local seq = emitAfter(KEYS[2], KEYS[3], base, events, hooks)
for field, value in pairs(fields) do
  write[#write + 1] = field
  write[#write + 1] = value
end
return { 'ok', attempt, seq, write }
