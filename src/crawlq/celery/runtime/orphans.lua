#!lua flags=allow-oom
-- allow-oom (see scripts.py): deletes dead runners and moves due times.
-- orphans.lua: Celery engine. Take the URLs that dead workers were running, and free the
-- politeness slots they held, in one step: every entry of `running` whose worker process
-- has not beaten within the staleness limit is removed; those of its fingerprints still
-- pending are returned (due now), so that the caller sends them again; and its slot tokens
-- ("runner|..." members) in the given hosts' slot sets are removed. Two callers at once
-- return each orphan once. `running` holds one entry per busy pool slot: small.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] running    hash  "host:pid:thread" -> 20-byte fingerprints of the task it runs now
-- KEYS[2] workers    zset  "host:pid" -> last heartbeat Unix ms
-- KEYS[3] pending    hash  fingerprint -> owner "\n" request JSON, until settled
-- KEYS[4] pending_at zset  pending fingerprint -> due Unix ms (set to now for the orphans)
-- KEYS[5..] slots:{host} zset slot token -> hold deadline, of the hosts of the orphans
--           (the caller reads them first; a host left out keeps its slots until their hold)
-- ARGV[1] now (Unix ms)   ARGV[2] staleness limit (ms)
-- Returns: flat array of fingerprint, pending value, ... (the orphans still pending).
check_job()
local running, workers, pending, pending_at = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local SLOTS = 5 -- KEYS[SLOTS..]: the slot sets of the orphans' hosts
local now, stale = tonumber(ARGV[1]), tonumber(ARGV[2])
local out, dead = {}, {}
local items = redis.call("HGETALL", running)
for j = 1, #items, 2 do
  local runner, fps = items[j], items[j + 1]
  local process = string.match(runner, "^(.*):[^:]*$") or runner
  local beat = redis.call("ZSCORE", workers, process)
  if not beat or tonumber(beat) < now - stale then
    dead[runner] = true
    redis.call("HDEL", running, runner)
    for i = 1, #fps - 19, 20 do
      local fp = string.sub(fps, i, i + 19)
      local value = redis.call("HGET", pending, fp)
      if value then
        redis.call("ZADD", pending_at, "XX", now, fp)
        out[#out + 1] = fp
        out[#out + 1] = value
      end
    end
  end
end
if next(dead) then
  for k = SLOTS, #KEYS do
    for _, token in ipairs(redis.call("ZRANGE", KEYS[k], 0, -1)) do
      local holder = string.match(token, "^(.*)|[^|]*$")
      if holder and dead[holder] then redis.call("ZREM", KEYS[k], token) end
    end
  end
end
return out
