-- job_open.lua: join a job: read its id and dedup mode; with "create", first create the job
-- (a random id and the dedup mode, each only if unset). A job made by a crawlq without ids
-- (its hash exists, with no id) gets one. Nothing is written when the job exists with an id,
-- so a worker can join a job on a Redis at its maxmemory, and never creates one.
-- KEYS[1] job hash: id, dedup, settings, engine, created_ms (Redis server time when created),
--         layout ("2": the key layout of keys.py, written when the job is created; a job
--         without it was created before, see RedisFrontier.open), paused (present while the
--         job is paused: `crawlq job pause`)
-- ARGV[1] "1": create the job if it does not exist ("0": only join)
-- ARGV[2] a new random id (used only if the job gets one now)
-- ARGV[3] dedup mode for a new job ("set" | "bloom capacity error_rate")
-- Returns: {id, dedup}, each false (nil) when unset (the job does not exist).
local LAYOUT = "2" -- keys.py's LAYOUT
local job = KEYS[1]
local create, new_id, dedup = ARGV[1] == "1", ARGV[2], ARGV[3]
local id = redis.call("HGET", job, "id")
if create then
  if not id then
    local t = redis.call("TIME")
    local ms = t[1] * 1000 + math.floor(t[2] / 1000)
    redis.call("HSET", job, "id", new_id, "created_ms", ms, "layout", LAYOUT)
    id = new_id
  end
  if redis.call("HEXISTS", job, "dedup") == 0 then
    redis.call("HSET", job, "dedup", dedup)
  end
elseif not id and redis.call("EXISTS", job) == 1 then
  redis.call("HSET", job, "id", new_id)
  id = new_id
end
return {id, redis.call("HGET", job, "dedup")}
