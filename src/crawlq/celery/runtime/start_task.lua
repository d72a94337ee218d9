#!lua flags=allow-oom
-- allow-oom (see scripts.py): one small entry per worker thread and per worker process.
-- start_task.lua: Celery engine. A worker thread (runner) starts a task: record the URLs it
-- runs now (replacing its earlier task's) and a heartbeat of its process, in one step.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] running  hash  runner "host:pid:thread" -> the 20-byte fingerprints its task runs
-- KEYS[2] workers  zset  process "host:pid" -> last heartbeat Unix ms
-- ARGV[1] runner   ARGV[2] its process   ARGV[3] now (Unix ms)   ARGV[4] packed fingerprints
-- Returns: 1.
check_job()
local running, workers = KEYS[1], KEYS[2]
local runner, process, now, fps = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
redis.call("ZADD", workers, now, process)
redis.call("HSET", running, runner, fps)
return 1
