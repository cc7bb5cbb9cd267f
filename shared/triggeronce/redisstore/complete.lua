-- Marks KEYS[1] done for ARGV[2] ms if ARGV[1] owns it. Returns 1 when the
-- marker is done and owned by ARGV[1] (also on a retried Complete), else 0.
if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5
local m = redis.call('HMGET', KEYS[1], 'state', 'owner')
if m[2] ~= ARGV[1] then return 0 end
if m[1] == 'done' then return 1 end
if m[1] ~= 'processing' then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'state', 'done', 'doneAt', string.format('%.0f', now))
redis.call('HDEL', KEYS[1], 'leaseUntil')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
