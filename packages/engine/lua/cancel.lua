--[[
  Cancel a task (LMSP 7.3), atomically: the outcome depends on the state at commit time.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] channel  KEYS[4] inputs hash  KEYS[5] token snapshot
  ARGV[1] now (ms)
  ARGV[2] outcome per state, "state=outcome,..." where outcome is a status, `noop` or `not_cancelable`
          (from the TypeScript CANCEL_OUTCOME table)
  ARGV[3] task retention (ms)  ARGV[4] event retention (ms)
  ARGV[5] result to store when the task ends `cancelled` at once (JSON)
  ARGV[6] event type, ARGV[7] event data for an immediate `cancelled`
  ARGV[8] event type, ARGV[9] event data for `cancelling`
  ARGV[10] prefix of the worker channels: a task that goes `cancelling` is announced to the worker
           holding it on ARGV[10] .. lease_owner (plain PUBLISH: a channel, not a key, so the script
           still touches only the task's slot)

  A queued new attempt of a task its clients saw `loading` or `running` (field `shown`), and a
  task parked for its caller's input, end at once too, but through `cancelling` (its event first),
  so the status their clients see follows LMSP 7.2 and the MCP view.

  Returns {'cancelled'|'cancelling'|'noop'|'not_cancelable', status} or {'missing'}
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable).
]]
local task = KEYS[1]
local status, shown, seq, attempt, side, parkedField, owner, hooks = unpack(
  redis.call('HMGET', task, 'status', 'shown', 'seq', 'attempt', 'side_keys', 'parked', 'lease_owner', 'hooks')
)
if not status then
  return { 'missing' }
end
local outcome = string.match(',' .. ARGV[2] .. ',', ',' .. status .. '=([%w_]+),')
if outcome == 'noop' or outcome == 'not_cancelable' or not outcome then
  return { outcome or 'not_cancelable', status }
end
-- A parked task (waiting for its caller's input) has no worker to acknowledge a cancel: it ends at once.
local parked = parkedField ~= false
if outcome ~= 'cancelled' and parked then
  outcome = 'cancelled'
end
local unwritable = refuseUnwritable(task, KEYS[2], nil, { seq, attempt })
if unwritable then
  return unwritable
end
local now = tonumber(ARGV[1])
if outcome == 'cancelled' then
  redis.call('HSET', task, 'status', 'cancelled', 'updated_at', now, 'result', ARGV[5])
  redis.call('HDEL', task, 'lease_owner', 'lease_until', 'parked', 'input_deadline')
  local events = { ARGV[6], ARGV[7] }
  if parked or (status == 'queued' and (shown == 'loading' or shown == 'running')) then
    events = { ARGV[8], ARGV[9], ARGV[6], ARGV[7] }
  end
  emitList(task, KEYS[2], KEYS[3], events, hooks)
  expireTask({ task, KEYS[2], KEYS[4], KEYS[5] }, now, tonumber(ARGV[3]), tonumber(ARGV[4]), false, side)
else
  redis.call('HSET', task, 'status', outcome, 'updated_at', now)
  emit(task, KEYS[2], KEYS[3], ARGV[8], ARGV[9], hooks)
  if owner then
    redis.call('PUBLISH', ARGV[10] .. owner, string.match(task, '{(.-)}'))
  end
end
return { outcome, outcome }
