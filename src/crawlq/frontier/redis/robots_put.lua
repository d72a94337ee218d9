#!lua flags=allow-oom
-- allow-oom (see scripts.py): one robots.txt record per origin.
-- robots_put.lua: store one origin's robots.txt record and end the claim on its fetch, at once.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] robots hash origin -> record   KEYS[2] robots_claims hash origin -> "until_ms holder"
-- ARGV[1] origin  ARGV[2] record (crawlq.frontier.robots.RobotsRecord.to_bytes())
-- Returns: 1.
check_job()
local robots, claims = KEYS[1], KEYS[2]
local origin, record = ARGV[1], ARGV[2]
redis.call("HSET", robots, origin, record)
redis.call("HDEL", claims, origin)
return 1
