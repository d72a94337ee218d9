-- _lib.lua: helpers shared by the frontier scripts. scripts.py puts this text in front of
-- every script before loading it; it touches only keys that the script passes in.

-- A host's politeness: its override in the policy hash ("delay_ms concurrency"), or the defaults.
local function host_policy(policy_key, host, default_delay, default_conc)
  local pol = redis.call("HGET", policy_key, host)
  if pol then
    local d, c = string.match(pol, "^(%d+) (%d+)$")
    return tonumber(d), tonumber(c)
  end
  return default_delay, default_conc
end

-- Put back in `ready` every host given as {name, queue key} that has queued work and a free
-- slot, at its next-allowed time; then leave up to `most` wake-up tokens on the inbox for
-- idle workers (one per idle worker at the most, 64 at the most).
-- k: {ready =, inflight =, next =, policy =, inbox =, idle =} key names.
local function make_ready(k, hosts, default_conc, most)
  local woken = 0
  for _, h in ipairs(hosts) do
    local host, queue = h[1], h[2]
    local inflight = tonumber(redis.call("HGET", k.inflight, host) or "0")
    if inflight <= 0 then redis.call("HDEL", k.inflight, host) end
    local _, conc = host_policy(k.policy, host, 0, default_conc)
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

