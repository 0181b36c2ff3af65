-- Shared prelude of every engine script (prepended by the loader, not a script itself).
-- Events are numbered by the task's `seq` counter (the LMSP sequence numbers). The events of one
-- script are one stream entry, its id "<last seq>-0" and its fields the events' type and data
-- pairs in order (an entry of one event is what earlier releases wrote for each), so a finish with
-- its seven closing events costs one XADD, not seven; readers number an entry's events back from
-- its id. They are announced on the task's sharded channel for live readers on any replica.
-- Every script that emits takes the writer's clock (ms) as ARGV[1]: readers measure delivery by it.
-- The events of one script are announced together, in one message per script rather than one per
-- event: a single event as "<seq>\n<written at>\n<type>\n<data>" (what readers of earlier releases
-- parse), several as "<first>-<last>\n<written at>\n<type>\n<data>\n<type>\n<data>...". Event
-- data is JSON from the services (no raw newline), so the lines split unambiguously.
-- Redis's own clock (ms), what lease deadlines are stamped and judged by: a writer's and a
-- sweeper's clocks are two machines', and a few seconds between them would restart healthy
-- attempts. (Redis 7 replicates a script's effects, so TIME in a script that writes is safe.)
local function serverMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function announce(channel, first, list)
  local count = #list / 2
  local head = count == 1 and tostring(first) or (first .. '-' .. (first + count - 1))
  redis.call('SPUBLISH', channel, head .. '\n' .. ARGV[1] .. '\n' .. table.concat(list, '\n'))
end

-- The event types a webhook can be told of (docs/webhooks.md): the task's status changes, its
-- questions (an `in_progress` with `task_status: input_required`) and its end; deltas never are.
local HOOKED_TYPES = {
  ['response.created'] = true, ['response.in_progress'] = true, ['response.restarted'] = true,
  ['response.completed'] = true, ['response.incomplete'] = true, ['response.failed'] = true,
  ['response.cancelled'] = true,
}

-- A task whose tenant had webhook endpoints when it was created carries `hooks` = '1' in its
-- record (create.ts). Its events of HOOKED_TYPES are recorded, in the same script that writes
-- them, as one entry of its outbox `tl:{<id>}:outbox` (in the task's own slot: the key is the
-- event log's with another suffix) naming their sequence numbers; the webhook relay turns each
-- into delivery jobs and deletes it. So no event is without its deliveries, and none is delivered
-- that was not written. `hooks` is the record's field (false when absent), which every script
-- that emits has read or written already: an unhooked task's script adds no command here.
local OUTBOX_TTL_MS = 604800000

local function recordDeliveries(eventsKey, base, list, hooks)
  if hooks ~= '1' then
    return
  end
  local seqs = {}
  for k = 1, #list / 2 do
    if HOOKED_TYPES[list[2 * k - 1]] then
      seqs[#seqs + 1] = base + k
    end
  end
  if #seqs == 0 then
    return
  end
  local stem = string.sub(eventsKey, 1, -#':events' - 1)
  redis.call('XADD', stem .. ':outbox', '*', 'seqs', table.concat(seqs, ','))
  -- Bounded should no relay ever run (TASKLINE_WEBHOOKS off everywhere): a week after its last entry.
  redis.call('PEXPIRE', stem .. ':outbox', OUTBOX_TTL_MS)
end

-- Appends the events of `list` ({type, data, type, data, ...}) numbered from `base` + 1 and
-- announces them in one message; returns the last sequence number (`base` when there are none).
-- The caller has set the task's `seq` to `base` + #list / 2 in its own write of the record.
-- `hooks`: the record's `hooks` field (see recordDeliveries).
local function emitAfter(eventsKey, channel, base, list, hooks)
  local count = #list / 2
  if count > 0 then
    local fields = {}
    for k = 1, count do
      fields[#fields + 1] = 'type'
      fields[#fields + 1] = list[2 * k - 1]
      fields[#fields + 1] = 'data'
      fields[#fields + 1] = list[2 * k]
    end
    redis.call('XADD', eventsKey, (base + count) .. '-0', unpack(fields))
    announce(channel, base + 1, list)
    recordDeliveries(eventsKey, base, list, hooks)
  end
  return base + count
end

-- The (type, data) pairs found in ARGV from index `first` on, as a list for emitAfter.
local function argvEvents(first)
  local list = {}
  for i = first, first + 2 * math.floor((#ARGV - first + 1) / 2) - 1 do
    list[#list + 1] = ARGV[i]
  end
  return list
end

-- Appends the events of `list`, numbered by the task's `seq` counter in one step; returns the
-- last sequence number.
local function emitList(taskKey, eventsKey, channel, list, hooks)
  local last = redis.call('HINCRBY', taskKey, 'seq', #list / 2)
  return emitAfter(eventsKey, channel, last - #list / 2, list, hooks)
end

-- emit(taskKey, eventsKey, channel, type, data, hooks): one event; returns its sequence number.
local function emit(taskKey, eventsKey, channel, type, data, hooks)
  return emitList(taskKey, eventsKey, channel, { type, data }, hooks)
end

-- The side keys a task has written are named in its record's `side_keys` ('i' its inputs hash, 't'
-- its token snapshot), so that its end expires those alone. A record written before the field
-- existed has none (false from HMGET): any side key may be there.
local function namesSideKey(side, letter)
  return not side or string.find(side, letter, 1, true) ~= nil
end

-- Returns `side` with `letter` added, or nil when nothing is to be written.
local function withSideKey(side, letter)
  if namesSideKey(side, letter) then
    return nil
  end
  return side .. letter
end

-- On entering a terminal state every key of the task ({task, events, inputs, tokens}) gets its
-- retention (ms); of the side keys, those `side` names (all when it is false). A caller that wrote
-- `ended_at` and `expires_at` in its own write of the record passes `stamped`.
local function expireTask(keys, now, taskRetentionMs, eventRetentionMs, stamped, side)
  if not stamped then
    redis.call('HSET', keys[1], 'ended_at', now, 'expires_at', now + taskRetentionMs)
  end
  redis.call('PEXPIRE', keys[1], taskRetentionMs)
  redis.call('PEXPIRE', keys[2], eventRetentionMs)
  for i, letter in ipairs({ 'i', 't' }) do
    if namesSideKey(side, letter) then
      redis.call('PEXPIRE', keys[2 + i], taskRetentionMs)
    end
  end
end

-- Terminal states never change: every script refuses to touch a task in one of these.
local function isTerminal(status)
  return status == 'succeeded' or status == 'failed' or status == 'cancelled'
end

-- The precondition of a running attempt's own writes (output, questions): nil when `expected` is
-- the task's attempt and it is running, else the refusal to return. A parked task (waiting for its
-- caller's input, or answered and waiting for a worker: field `parked`) belongs to no attempt.
local function refuseUnlessRunning(status, attempt, expected, parked)
  if not status then
    return { 'missing' }
  end
  if attempt ~= expected or parked then
    return { 'stale', status }
  end
  if status ~= 'running' then
    return { 'illegal', status }
  end
  return nil
end

-- Redis does not roll a script back: the writes made before a failing command stay. So every
-- script checks, before its first write, that none of its writes can fail: the task's `seq` and
-- `attempt` are integers (HINCRBY), its event log is a stream (or absent) whose last entry is not
-- ahead of `seq` (XADD needs a larger id), and each key of `others` ({key = type}) has its type.
-- `counters` is {seq, attempt} as the caller already read them from the record (read here if nil).
-- Returns nil when the writes can go ahead, else the refusal {'corrupt', what}.
local function refuseUnwritable(taskKey, eventsKey, others, counters)
  counters = counters or redis.call('HMGET', taskKey, 'seq', 'attempt')
  local seq = tonumber(counters[1] or '0')
  if not seq or (counters[2] and not tonumber(counters[2])) then
    return { 'corrupt', 'the task record has a counter that is not a number' }
  end
  -- One read for both checks: an absent log reads empty, a key of another type answers WRONGTYPE.
  local top = redis.pcall('XREVRANGE', eventsKey, '+', '-', 'COUNT', 1)
  if top['err'] then
    return { 'corrupt', 'the event log is a ' .. redis.call('TYPE', eventsKey)['ok'] .. ', not a stream' }
  end
  if top[1] and tonumber(string.match(top[1][1], '^%d+')) > seq then
    return { 'corrupt', 'the event log is ahead of the task record' }
  end
  for key, want in pairs(others or {}) do
    local t = redis.call('TYPE', key)['ok']
    if t ~= 'none' and t ~= want then
      return { 'corrupt', key .. ' is a ' .. t .. ', not a ' .. want }
    end
  end
  return nil
end
