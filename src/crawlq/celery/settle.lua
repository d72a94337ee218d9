-- settle.lua: Celery engine. Fingerprints whose outcome is in the store leave `pending` and are
-- counted once, however often a task is delivered again.
-- KEYS[1] pending     hash  fingerprint -> owner "\n" request JSON
-- KEYS[2] pending_at  zset  pending fingerprint -> due Unix ms
-- KEYS[3] stats       hash  counters: done, dead
-- ARGV[1] n_done (fingerprints stored as a page or filtered record, first in the list)
-- ARGV[2..] fingerprints: the n_done "done" ones, then the dead-lettered ones
-- Returns: how many were pending (and are now settled).
local n_done = tonumber(ARGV[1])
local done, dead = 0, 0
for i = 2, #ARGV do
  if redis.call("HDEL", KEYS[1], ARGV[i]) == 1 then
    redis.call("ZREM", KEYS[2], ARGV[i])
    if i - 1 <= n_done then done = done + 1 else dead = dead + 1 end
  end
end
if done > 0 then redis.call("HINCRBY", KEYS[3], "done", done) end
if dead > 0 then redis.call("HINCRBY", KEYS[3], "dead", dead) end
return done + dead
