-- Deletes KEYS[1] if it is a processing marker owned by ARGV[1]. Returns 1
-- when it deleted the marker, else 0.
local m = redis.call('HMGET', KEYS[1], 'state', 'owner')
if m[1] == 'processing' and m[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
