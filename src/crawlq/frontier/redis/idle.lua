-- idle.lua: register the worker as idle (waiting for work) and take one more look, at once:
-- a settle or push that ran before the registration is visible to this look, and one after
-- it leaves a wake-up token (see make_ready in _lib.lua).
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] idle zset worker -> waiting since   KEYS[2] ready zset host -> next-allowed ms
-- KEYS[3] inbox list   KEYS[4] leases zset   KEYS[5] delayed zset
-- ARGV[1] now (Unix ms)  ARGV[2] worker id
-- Returns: {first ready host's next-allowed ms or false, inbox length, leases, delayed}.
check_job()
redis.call("ZADD", KEYS[1], ARGV[1], ARGV[2])
local first = redis.call("ZRANGE", KEYS[2], 0, 0, "WITHSCORES")
return {first[2] or false, redis.call("LLEN", KEYS[3]), redis.call("ZCARD", KEYS[4]),
        redis.call("ZCARD", KEYS[5])}
