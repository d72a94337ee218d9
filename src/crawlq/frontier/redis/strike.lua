#!lua flags=allow-oom
-- allow-oom (see scripts.py): one strike count and policy entry per host.
-- strike.lua: count one pushback (429/503) or connection failure of a host and pause it, for
-- every worker at once (crawlq.rules.politeness decides the numbers; this only applies them).
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1..6] the host bookkeeping keys (host_keys() in _lib.lua: ready, inflight, next,
--            policy, inbox, idle); this script moves ready, next and policy
-- KEYS[7] strikes hash kind .. "\n" .. host -> strikes of that kind in a row (ack resets)
-- ARGV[1] now (Unix ms)  ARGV[2] host  ARGV[3] kind "pushback" | "failure"
-- ARGV[4] default delay (ms)  ARGV[5] default concurrency
-- ARGV[6] probe_from: from this count on, one request at a time until the host answers (0: never)
-- ARGV[7] down_from: from this count on, the host is down: its URLs are dead-lettered (0: never)
-- ARGV[8..] pause schedule (ms): after the k-th strike in a row the host waits ARGV[7 + k]
--           (the last entry repeats)
-- Returns: the strike count of this kind in a row, this one included.
check_job()
local hk = host_keys()
local strikes = KEYS[7]
local now, host, kind = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local ddelay, dconc = tonumber(ARGV[4]), tonumber(ARGV[5])
local probe_from, down_from = tonumber(ARGV[6]), tonumber(ARGV[7])
local PAUSES = 7 -- ARGV[PAUSES + k]: the pause after the k-th strike in a row
local npauses = #ARGV - PAUSES
local count = redis.call("HINCRBY", strikes, kind .. "\n" .. host, 1)
local pause = tonumber(ARGV[PAUSES + math.min(count, npauses)])
local until_ms = now + pause
local nxt = tonumber(redis.call("HGET", hk.next, host) or "0") or 0
if until_ms > nxt then
  redis.call("HSET", hk.next, host, until_ms)
  redis.call("ZADD", hk.ready, "XX", until_ms, host) -- only if it is waiting there now
end
local flags = ""
if probe_from > 0 and count >= probe_from then flags = "p" end
if down_from > 0 and count >= down_from then flags = "d" end
if flags ~= "" then
  local pol = redis.call("HGET", hk.policy, host)
  local d, c = ddelay, dconc
  if pol then
    local pd, pc = string.match(pol, "^(%d+) (%d+)")
    if pd then d, c = tonumber(pd), tonumber(pc) end
  end
  set_policy(hk.policy, host, d, c, flags)
  if flags == "d" then -- drain it now: its URLs are dead-lettered without a request
    redis.call("HSET", hk.next, host, now)
    redis.call("ZADD", hk.ready, "XX", now, host)
  end
end
return count
