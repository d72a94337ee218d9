-- admit.lua: Celery engine dedup. Mark fingerprints seen and pending (atomic set-if-absent),
-- so that two workers discovering one URL enqueue it once.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] seen        set   20-byte fingerprints ever admitted (shared with the native frontier)
-- KEYS[2] pending     hash  fingerprint -> owner "\n" request JSON, until settled
-- KEYS[3] pending_at  zset  pending fingerprint -> Unix ms by which a task should run it
-- KEYS[4] stats       hash  counters: seen
-- ARGV[1] mode  "push": before enqueueing (1 = new, or pending under this same owner, whose
--               task was delivered again after a crash and must enqueue it again);
--               "run": a task about to run (1 = new, or still pending: run it)
-- ARGV[2] now (Unix ms): the due time of the URLs returned with 1
-- ARGV[3..] triples: fingerprint, owner (hex fingerprint of the page that found the URL, or a
--               tag such as "seed" or "task"; no "\n"), request JSON
-- Returns: array of 1 (enqueue / run it) or 0 (a duplicate, or already settled), one per triple.
check_job()
local mode, now = ARGV[1], ARGV[2]
local out, added = {}, 0
for i = 3, #ARGV, 3 do
  local fp, owner = ARGV[i], ARGV[i + 1]
  local ok = false
  if redis.call("SADD", KEYS[1], fp) == 1 then
    redis.call("HSET", KEYS[2], fp, owner .. "\n" .. ARGV[i + 2])
    added = added + 1
    ok = true
  else
    local held = redis.call("HGET", KEYS[2], fp)
    if held and (mode == "run" or string.sub(held, 1, #owner + 1) == owner .. "\n") then
      ok = true
    end
  end
  if ok then
    redis.call("ZADD", KEYS[3], now, fp)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if added > 0 then redis.call("HINCRBY", KEYS[4], "seen", added) end
return out
