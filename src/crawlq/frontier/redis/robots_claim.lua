-- robots_claim.lua: claim the fetch of one origin's robots.txt (single flight across workers).
-- The claim holds until its Unix ms deadline; the same holder may claim again (extends it).
-- KEYS[1] robots_claims hash origin -> "until_ms holder"
-- ARGV[1] origin  ARGV[2] holder  ARGV[3] now (Unix ms)  ARGV[4] claim length (ms, > 0)
-- Returns: 1 when the holder holds the claim now, 0 when another live claim holds it.
local origin, holder, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local cur = redis.call("HGET", KEYS[1], origin)
if cur then
  local until_ms, who = string.match(cur, "^(%d+) (.*)$")
  -- a value we cannot read is treated as a lapsed claim (shared state is untrusted)
  if until_ms and tonumber(until_ms) > now and who ~= holder then return 0 end
end
redis.call("HSET", KEYS[1], origin, (now + tonumber(ARGV[4])) .. " " .. holder)
return 1
