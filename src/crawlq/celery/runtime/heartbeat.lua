#!lua flags=allow-oom
-- allow-oom (see scripts.py): one small entry per worker process.
-- heartbeat.lua: record a Celery worker process's heartbeat in a job that still exists.
-- KEYS[1] job hash   KEYS[2] workers zset worker -> last heartbeat Unix ms
-- ARGV[1] the worker process (host:pid)   ARGV[2] now (Unix ms)
-- Returns 1 when recorded, 0 when the job is gone (deleted, expired, a Redis restarted
-- without persistence): a heartbeat never re-creates a job's keys.
local job_key, workers = KEYS[1], KEYS[2]
local worker, now = ARGV[1], ARGV[2]
if redis.call("EXISTS", job_key) == 0 then
  return 0
end
redis.call("ZADD", workers, now, worker)
return 1
