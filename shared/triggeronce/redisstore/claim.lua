-- Claims KEYS[1] for ARGV[1] (owner), atomically. The lease is measured on
-- Redis's clock (TIME), never the caller's.
-- ARGV: owner, lease ms, retention ms, function, event ID, event type, subject.
-- Returns {status, attempts, lease end in Unix ms}; status 1 claimed,
-- 2 taken over, 3 done, 4 in progress.
if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner, lease, retention = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local m = redis.call('HMGET', KEYS[1], 'state', 'owner', 'attempts', 'leaseUntil')
local state, holder = m[1], m[2]
local attempts, leaseUntil = tonumber(m[3]) or 0, tonumber(m[4]) or 0
if state == 'done' then
  return {3, 0, 0}
elseif state == 'processing' then
  if holder == owner then
    -- The same owner again: a retried Claim whose first reply was lost.
    if attempts > 1 then return {2, attempts, leaseUntil} end
    return {1, attempts, leaseUntil}
  end
  if leaseUntil > now then return {4, 0, leaseUntil} end
elseif state then
  return redis.error_reply('malformed marker: state ' .. tostring(state))
end
-- No marker, or a processing marker whose lease has ended: claim it.
local status = 1
if state == 'processing' then status = 2 end
attempts = attempts + 1
leaseUntil = now + lease
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1],
  'state', 'processing', 'owner', owner, 'attempts', attempts,
  'claimedAt', string.format('%.0f', now), 'leaseUntil', string.format('%.0f', leaseUntil),
  'function', ARGV[4], 'eventId', ARGV[5], 'eventType', ARGV[6], 'subject', ARGV[7])
-- Kept for the retention after the lease ends, so a takeover still sees
-- the attempts and a crashed claim stays readable.
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', lease + retention))
return {status, attempts, leaseUntil}
