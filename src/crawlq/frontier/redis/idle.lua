#!lua flags=allow-oom
-- allow-oom (see scripts.py): one idle entry per worker.
-- idle.lua: register the worker as idle (waiting for work) and take one more look, at once:
-- a settle or push that ran before the registration is visible to this look, and one after
-- it leaves a wake-up token (see make_ready in _lib.lua).
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1..6] the host bookkeeping keys (host_keys() in _lib.lua: ready, inflight, next,
--            policy, inbox, idle); this script reads ready and inbox and writes idle
-- KEYS[7] leases zset fp..host -> deadline   KEYS[8] delayed zset fp..host -> due Unix ms
-- ARGV[1] now (Unix ms)  ARGV[2] worker id
-- Returns: {first ready host's next-allowed ms or false, inbox length, leases, delayed}.
check_job()
local hk = host_keys()
local leases, delayed = KEYS[7], KEYS[8]
local now, worker = ARGV[1], ARGV[2]
redis.call("ZADD", hk.idle, now, worker)
local first = redis.call("ZRANGE", hk.ready, 0, 0, "WITHSCORES")
return {first[2] or false, redis.call("LLEN", hk.inbox), redis.call("ZCARD", leases),
        redis.call("ZCARD", delayed)}
