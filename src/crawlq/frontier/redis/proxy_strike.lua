#!lua flags=allow-oom
-- allow-oom (see scripts.py): one entry per proxy.
-- proxy_strike.lua: count one failure of a proxy (crawlq.rules.proxies) and bench it after enough
-- in a row, for every worker at once (the engine decides what is a proxy's failure).
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] proxies hash proxy id (16 hex digits, never a credential) -> "failures benches until_ms"
-- ARGV[1] now (Unix ms)  ARGV[2] proxy id
-- ARGV[3] failures in a row that bench it  ARGV[4] first bench (ms)
-- ARGV[5] most doublings of a bench in a row
-- Returns: {failures, benches, until_ms} after this failure (failures is 0 when it benched).
check_job()
local proxies = KEYS[1]
local now, id = tonumber(ARGV[1]), ARGV[2]
local limit, bench, doublings = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local failures, benches, until_ms = 0, 0, 0
local row = redis.call("HGET", proxies, id)
if row then
  local f, b, u = string.match(row, "^(%d+) (%d+) (%d+)$")
  -- a row another writer left is untrusted: past 15 digits a Lua number is no exact integer
  -- (and a reply would wrap negative), so such a row starts a clean count
  if f and #f <= 15 and #b <= 15 and #u <= 15 then
    failures, benches, until_ms = tonumber(f), tonumber(b), tonumber(u)
  end
end
if until_ms > now then -- benched already (a request chosen before the bench was seen)
  return {failures, benches, until_ms}
end
failures = failures + 1
if failures >= limit then
  benches = benches + 1
  until_ms = now + bench * 2 ^ math.min(benches - 1, doublings)
  failures = 0
end
redis.call("HSET", proxies, id, string.format("%d %d %d", failures, benches, until_ms))
return {failures, benches, until_ms}
