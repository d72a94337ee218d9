#!lua flags=allow-oom
-- allow-oom (see scripts.py): one policy entry per host.
-- policy.lua: set a host's politeness (delay and concurrency), keeping its breaker flags.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] policy hash host -> "delay_ms concurrency[ flags]"
-- ARGV[1] host  ARGV[2] delay (ms)  ARGV[3] concurrency
-- Returns: 1.
check_job()
local policy = KEYS[1]
local host, delay, conc = ARGV[1], ARGV[2], ARGV[3]
local pol = redis.call("HGET", policy, host)
local flags = ""
if pol then flags = string.match(pol, "^%d+ %d+ ?([pd]*)$") or "" end
set_policy(policy, host, delay, conc, flags)
return 1
