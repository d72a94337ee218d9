#!lua flags=allow-oom
-- allow-oom (see scripts.py): takes small per-host slot entries and moves the window.
-- acquire.lua: Celery engine politeness. Take up to n request slots on one host if its window
-- is open now, moving its next-allowed time in the same step, for every worker at once.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] next     hash  host -> next-allowed Unix ms (shared with the native frontier)
-- KEYS[2] slots    zset  this host's held slots: token -> hold deadline Unix ms
-- KEYS[3] policy   hash  host -> "delay_ms concurrency" override
-- ARGV[1] now (Unix ms)   ARGV[2] host   ARGV[3] n = slots wanted (>= 1)
-- ARGV[4] default delay (ms)   ARGV[5] default concurrency
-- ARGV[6] hold (ms): a slot not released by then is freed (its worker died)
-- ARGV[7] token prefix: slot i is named prefix .. ":" .. i   ARGV[8] wait (ms) while paused
-- Returns: {granted, wait_ms}: granted slots (0..n); when 0, wait_ms until the window opens,
-- -1 when the host's concurrency is used up (no way to know when a fetch ends), or -2 when
-- the host is down (its circuit breaker gave up: dead-letter its URLs without a request).
-- A probing host (policy flag "p") takes one request at a time (see crawlq.rules.politeness).
-- A paused job (field "paused" of the job hash, `crawlq job pause`) grants nothing: wait_ms is
-- ARGV[8] (the caller's pause poll interval), so its tasks come back later without an attempt.
local job_key = check_job()
local next_key, slots, policy = KEYS[1], KEYS[2], KEYS[3]
local now, host, n = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local default_delay, default_conc = tonumber(ARGV[4]), tonumber(ARGV[5])
local hold, prefix, pause_wait = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
if redis.call("HEXISTS", job_key, "paused") == 1 then return {0, pause_wait} end
redis.call("ZREMRANGEBYSCORE", slots, "-inf", now)
local delay, conc, flags = host_policy(policy, host, default_delay, default_conc)
if flags == "d" then return {0, -2} end
local next_at = tonumber(redis.call("HGET", next_key, host) or "0")
if now < next_at then return {0, next_at - now} end
local free = conc - redis.call("ZCARD", slots)
if free <= 0 then return {0, -1} end
local take = math.min(n, free)
if delay > 0 then take = 1 end
for i = 1, take do redis.call("ZADD", slots, now + hold, prefix .. ":" .. i) end
redis.call("PEXPIRE", slots, hold)
redis.call("HSET", next_key, host, now + delay)
return {take, 0}
