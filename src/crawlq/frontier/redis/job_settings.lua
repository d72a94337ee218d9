-- job_settings.lua: store the job's settings unless it has some, and return the stored ones.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS: none beyond the job hash (settings -> JSON), which check_job() returns
-- ARGV[1] the proposed settings (JSON)
-- Returns: the stored settings.
local job = check_job()
local proposed = ARGV[1]
if redis.call("HEXISTS", job, "settings") == 0 then
  redis.call("HSET", job, "settings", proposed)
end
return redis.call("HGET", job, "settings")
