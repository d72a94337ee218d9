#!lua flags=allow-oom
-- allow-oom (see scripts.py): moves the due times of pending URLs; adds no entry.
-- take.lua: Celery engine. A task is about to run its URLs: those still pending are due now
-- (run them), those settled are not (a task delivered again after its outcome was stored);
-- those never admitted (a scrape.delay task) are left to admit.lua in "run" mode, which may
-- grow memory and is refused by a Redis at its maxmemory. So a full Redis still runs the
-- tasks already sent.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] seen        set   20-byte fingerprints ever admitted
-- KEYS[2] pending     hash  fingerprint -> owner "\n" request JSON, until settled
-- KEYS[3] pending_at  zset  pending fingerprint -> Unix ms by which a task should run it
-- KEYS[4] stats       hash  counters: delayed
-- ARGV[1] now (Unix ms): the due time of the pending URLs
-- ARGV[2] retries of this task that start now (leave the "delayed" count; 0: none)
-- ARGV[3..] fingerprints
-- Returns: array, one per fingerprint: 1 pending (run it), 0 settled (a duplicate), 2 never
-- admitted (admit it first).
check_job()
local seen, pending, pending_at, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, started = ARGV[1], tonumber(ARGV[2])
local FIRST = 3 -- ARGV[FIRST..]: the fingerprints
local out = {}
for i = FIRST, #ARGV do
  local fp = ARGV[i]
  if redis.call("HEXISTS", pending, fp) == 1 then
    redis.call("ZADD", pending_at, now, fp)
    out[#out + 1] = 1
  elseif redis.call("SISMEMBER", seen, fp) == 1 then
    out[#out + 1] = 0
  else
    out[#out + 1] = 2
  end
end
if started > 0 then redis.call("HINCRBY", stats, "delayed", -started) end
return out
