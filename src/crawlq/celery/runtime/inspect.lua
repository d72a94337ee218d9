-- inspect.lua: Celery engine. Read one fingerprint's state in one atomic step (crawlq inspect).
-- Writes nothing.
-- KEYS[1] job          hash  its id is returned, so the caller sees a job gone or replaced
-- KEYS[2] seen         set   20-byte fingerprints ever admitted
-- KEYS[3] pending      hash  fingerprint -> owner "\n" request JSON, until settled
-- KEYS[4] pending_at   zset  pending fingerprint -> Unix ms it is due to run
-- KEYS[5] running      hash  runner "host:pid:thread" -> the 20-byte fingerprints its task runs
-- KEYS[6] workers      zset  process "host:pid" -> last heartbeat Unix ms
-- KEYS[7] dead_requests hash fingerprint -> owner "\n" request JSON of a dead-lettered URL
-- ARGV[1] fingerprint (20 bytes)
-- Returns: {job id, seen (1|0), pending value, due Unix ms, runner, its process's heartbeat
-- Unix ms, dead request value}; a missing value is nil.
local job, seen, pending, pending_at = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local running_key, workers, dead_requests = KEYS[5], KEYS[6], KEYS[7]
local fp = ARGV[1]
local runner, beat = false, false
local running = redis.call("HGETALL", running_key)
for j = 1, #running, 2 do
  local packed = running[j + 1]
  for at = 1, #packed - 19, 20 do
    if string.sub(packed, at, at + 19) == fp then runner = running[j] end
  end
  if runner then break end
end
if runner then
  local process = string.match(runner, "^(.*):[^:]*$") or runner
  beat = redis.call("ZSCORE", workers, process)
end
return {
  redis.call("HGET", job, "id"), redis.call("SISMEMBER", seen, fp),
  redis.call("HGET", pending, fp), redis.call("ZSCORE", pending_at, fp), runner, beat,
  redis.call("HGET", dead_requests, fp),
}
