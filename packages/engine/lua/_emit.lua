-- Shared prelude of every engine script (prepended by the loader, not a script itself).
-- emit(taskKey, eventsKey, channel, type, data) appends one event numbered by the task's `seq`
-- counter (stream id "<seq>-0", so ids are the LMSP sequence numbers) and announces it on the
-- task's sharded channel for live readers on any replica as "<seq>\n<written at>\n<type>\n<data>".
-- Every script that emits takes the writer's clock (ms) as ARGV[1]: readers measure delivery by it.
local function writeEvent(eventsKey, channel, seq, type, data)
  redis.call('XADD', eventsKey, seq .. '-0', 'type', type, 'data', data)
  redis.call('SPUBLISH', channel, seq .. '\n' .. ARGV[1] .. '\n' .. type .. '\n' .. data)
end

local function emit(taskKey, eventsKey, channel, type, data)
  local seq = redis.call('HINCRBY', taskKey, 'seq', 1)
  writeEvent(eventsKey, channel, seq, type, data)
  return seq
end

-- Appends the (type, data) pairs found in ARGV from index `first` on, numbered in one step;
-- returns the last sequence number (false when there are none). Each is announced on its own:
-- readers of an earlier release parse one event per message.
local function emitAll(taskKey, eventsKey, channel, first)
  local count = math.floor((#ARGV - first + 1) / 2)
  if count < 1 then
    return false
  end
  local last = redis.call('HINCRBY', taskKey, 'seq', count)
  for k = 1, count do
    writeEvent(eventsKey, channel, last - count + k, ARGV[first + 2 * k - 2], ARGV[first + 2 * k - 1])
  end
  return last
end

-- On entering a terminal state every key of the task gets its retention (ms).
local function expireTask(keys, now, taskRetentionMs, eventRetentionMs)
  redis.call('HSET', keys[1], 'ended_at', now, 'expires_at', now + taskRetentionMs)
  for i = 1, #keys do
    if i == 2 then
      redis.call('PEXPIRE', keys[i], eventRetentionMs)
    else
      redis.call('PEXPIRE', keys[i], taskRetentionMs)
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
-- Returns nil when the writes can go ahead, else the refusal {'corrupt', what}.
local function refuseUnwritable(taskKey, eventsKey, others)
  local counters = redis.call('HMGET', taskKey, 'seq', 'attempt')
  local seq = tonumber(counters[1] or '0')
  if not seq or (counters[2] and not tonumber(counters[2])) then
    return { 'corrupt', 'the task record has a counter that is not a number' }
  end
  local logType = redis.call('TYPE', eventsKey)['ok']
  if logType == 'stream' then
    local top = redis.call('XREVRANGE', eventsKey, '+', '-', 'COUNT', 1)[1]
    if top and tonumber(string.match(top[1], '^%d+')) > seq then
      return { 'corrupt', 'the event log is ahead of the task record' }
    end
  elseif logType ~= 'none' then
    return { 'corrupt', 'the event log is a ' .. logType .. ', not a stream' }
  end
  for key, want in pairs(others or {}) do
    local t = redis.call('TYPE', key)['ok']
    if t ~= 'none' and t ~= want then
      return { 'corrupt', key .. ' is a ' .. t .. ', not a ' .. want }
    end
  end
  return nil
end
