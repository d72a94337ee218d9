#!lua flags=allow-oom
-- allow-oom (see scripts.py): moves the due times of pending URLs and counts retries.
-- reschedule.lua: Celery engine. Pending URLs were sent again with a countdown: their due
-- time moves (only those still pending); and retries scheduled (or started, negative) are
-- counted, in one step.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] pending_at  zset  pending fingerprint -> Unix ms by which a task should run it
-- KEYS[2] stats       hash  counters: delayed (retries waiting), retries (ever scheduled)
-- ARGV[1] due (Unix ms)   ARGV[2] retries: added to delayed, and when > 0 to retries too
-- ARGV[3..] fingerprints
-- Returns: how many due times moved.
check_job()
local pending_at, stats = KEYS[1], KEYS[2]
local due, retries = ARGV[1], tonumber(ARGV[2])
local FIRST = 3 -- ARGV[FIRST..]: the fingerprints
local moved = 0
for i = FIRST, #ARGV do
  moved = moved + redis.call("ZADD", pending_at, "XX", "CH", due, ARGV[i])
end
if retries ~= 0 then redis.call("HINCRBY", stats, "delayed", retries) end
if retries > 0 then redis.call("HINCRBY", stats, "retries", retries) end
return moved
