-- claim.lua: mark redirect targets seen and done for their owner, without queueing them.
-- Idempotent for the owner: a re-delivered owner that claims again still holds the claim.
-- KEYS[1] seen set of fingerprints, or Bloom bits string    KEYS[2] claims hash fp -> owner fp
-- KEYS[3] stats hash counters
-- ARGV[1] owner fingerprint  ARGV[2] dedup mode "set" | "bloom"  ARGV[3] k (Bloom positions)
-- then per target: fp, then k bit positions
-- Returns: array of 1 (the owner holds the claim) or 0 (seen otherwise), one per target.
local owner, mode, k = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {}
local i = 4
while i <= #ARGV do
  local fp = ARGV[i]
  local new
  if mode == "set" then
    new = redis.call("SADD", KEYS[1], fp) == 1
  else
    new = false
    for j = 1, k do
      if redis.call("GETBIT", KEYS[1], ARGV[i + j]) == 0 then new = true end
    end
    if new then
      for j = 1, k do redis.call("SETBIT", KEYS[1], ARGV[i + j], 1) end
    end
  end
  if new then
    redis.call("HSET", KEYS[2], fp, owner)
    redis.call("HINCRBY", KEYS[3], "seen", 1)
    redis.call("HINCRBY", KEYS[3], "done", 1)
    out[#out + 1] = 1
  elseif redis.call("HGET", KEYS[2], fp) == owner then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
  i = i + 1 + k
end
return out
