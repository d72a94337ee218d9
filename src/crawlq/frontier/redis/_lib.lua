-- _lib.lua: helpers shared by the frontier scripts. scripts.py puts this text in front of
-- every script before loading it; it touches only keys that the script passes in.

-- The job's identity. Every script that writes begins with check_job(): its caller passes
-- the job hash as KEYS[1] and the job id it joined (when the job was seeded, see
-- job_open.lua) as ARGV[1]. check_job() removes both, so the rest of the script (and its
-- KEYS/ARGV header) numbers its own keys and arguments from 1, and fails the script before
-- any write (error reply "CRAWLQ_JOB_GONE <id found or ->") when the job is gone (a Redis
-- restart without persistence, deleted keys) or replaced by another job of the same name:
-- a worker never writes into a job it did not join. Returns the job hash's key name.
local function check_job()
  local job_key = table.remove(KEYS, 1)
  local joined = table.remove(ARGV, 1)
  local id = redis.call("HGET", job_key, "id")
  if not id or id ~= joined or joined == "" then
    error({err = "CRAWLQ_JOB_GONE " .. (id or "-")})
  end
  return job_key
end

-- The host bookkeeping keys. Every script that reads or moves hosts' readiness takes them as
-- its first six KEYS (after check_job() removed the job hash), always in this order, which
-- Keyspace.host_keys() in keys.py gives on the Python side:
-- KEYS[1] ready    zset host -> next-allowed Unix ms (hosts with queued work and a free slot)
-- KEYS[2] inflight hash host -> slots taken (leases whose requests are not reported done)
-- KEYS[3] next     hash host -> next-allowed Unix ms
-- KEYS[4] policy   hash host -> "delay_ms concurrency[ flags]"
-- KEYS[5] inbox    list producers' entries; "" is a wake-up token for an idle worker
-- KEYS[6] idle     zset worker -> Unix ms it started waiting for work
-- host_keys() returns them by name (the table make_ready takes); a script's own keys follow,
-- from KEYS[HOST_KEYS + 1].
local HOST_KEYS = 6
local function host_keys()
  return {ready = KEYS[1], inflight = KEYS[2], next = KEYS[3], policy = KEYS[4],
          inbox = KEYS[5], idle = KEYS[6]}
end

-- A host's politeness: its entry in the policy hash ("delay_ms concurrency" then optional
-- flags: "p" probing, one request at a time; "d" down, its URLs are dead-lettered), or the
-- defaults. Returns delay (ms), concurrency, flags ("" when none). A malformed entry (the
-- hash is shared state) counts as no entry.
local function host_policy(policy_key, host, default_delay, default_conc)
  local pol = redis.call("HGET", policy_key, host)
  if pol then
    local d, c, flags = string.match(pol, "^(%d+) (%d+) ?([pd]*)$")
    if d then
      local conc = tonumber(c)
      if string.find(flags, "p", 1, true) then conc = 1 end
      return tonumber(d), math.max(1, conc), flags
    end
  end
  return default_delay, default_conc, ""
end

-- Write a host's policy entry, keeping the given flags.
local function set_policy(policy_key, host, delay, conc, flags)
  local value = delay .. " " .. conc
  if flags ~= "" then value = value .. " " .. flags end
  redis.call("HSET", policy_key, host, value)
end

-- Put back in `ready` every host given as {name, queue key} that has queued work and a free
-- slot, at its next-allowed time; then leave up to `most` wake-up tokens on the inbox for
-- idle workers (one per idle worker at the most, 64 at the most).
-- k: the host bookkeeping keys by name (host_keys()).
local function make_ready(k, hosts, default_conc, most)
  local woken = 0
  for _, h in ipairs(hosts) do
    local host, queue = h[1], h[2]
    local inflight = tonumber(redis.call("HGET", k.inflight, host) or "0")
    if inflight <= 0 then redis.call("HDEL", k.inflight, host) end
    local _, conc, flags = host_policy(k.policy, host, 0, default_conc)
    if flags == "d" then conc = math.huge end
    if inflight < conc and redis.call("ZCARD", queue) > 0 then
      local at = redis.call("HGET", k.next, host) or "0"
      woken = woken + redis.call("ZADD", k.ready, "NX", at, host)
    end
  end
  if woken > 0 then
    local idle = redis.call("ZCARD", k.idle)
    for _ = 1, math.min(idle, most or woken, 64) do redis.call("LPUSH", k.inbox, "") end
  end
  return woken
end


-- The host answered: forget its strikes in a row and drop its breaker flags.
local function host_answered(strikes_key, policy_key, host)
  redis.call("HDEL", strikes_key, "pushback\n" .. host, "failure\n" .. host)
  local pol = redis.call("HGET", policy_key, host)
  if pol then
    local d, c, flags = string.match(pol, "^(%d+) (%d+) ?([pd]*)$")
    if d and flags ~= "" then set_policy(policy_key, host, d, c, "") end
  end
end

-- A request record (reqs hash value, layout 2) is its queue score, a newline and the request
-- JSON: the score (priority, then push order) travels with the record, so a lease released,
-- reaped, retried or revived goes back to its place in its host's queue. Returns the score
-- of `record`, or "0" for a missing or malformed one (shared state): the request then leases
-- at once and its worker dead-letters it as corrupt_request, instead of failing the step.
local function record_score(record)
  return record and string.match(record, "^(%-?%d+)\n") or "0"
end

-- A full queue under the drop-lowest policy (crawlq.frontier QueueBounds): the queue's lowest
-- request (its last: lowest priority, newest) or the newcomer itself, whichever ranks lower,
-- becomes a dead letter "frontier_full" in `dead_key` (reason "\n" record) with its time in
-- `dead_at_key`. `value` is the newcomer's record (score "\n" request JSON). Returns
-- (newcomer may be queued, evicted 0|1).
local function drop_lowest(queue, reqs, dead_key, dead_at_key, fp, score, value, now)
  local last = redis.call("ZRANGE", queue, -1, -1, "WITHSCORES")
  if #last == 2 and tonumber(last[2]) > tonumber(score) then
    local old = redis.call("HGET", reqs, last[1])
    redis.call("ZREM", queue, last[1])
    redis.call("HDEL", reqs, last[1])
    redis.call("HSET", dead_key, last[1], "frontier_full\n" .. (old or ""))
    redis.call("HSET", dead_at_key, last[1], now)
    return true, 1
  end
  redis.call("HSET", dead_key, fp, "frontier_full\n" .. value)
  redis.call("HSET", dead_at_key, fp, now)
  return false, 0
end
