#!lua flags=allow-oom
-- allow-oom (see scripts.py): item dedup of pages being drained (their items are kept).
-- item_keys.lua: claim item dedup keys for one page: each key's owner is its first page.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] item_keys hash key digest (20 bytes) -> owner page record fingerprint (20 bytes)
-- ARGV[1] owner (20 bytes)  ARGV[2..] key digests (20 bytes each)
-- Returns: one integer per key, in order: 1 new or owned by ARGV[1], 0 owned by another page.
check_job()
local item_keys = KEYS[1]
local owner = ARGV[1]
local out = {}
for i = 2, #ARGV do
  local key = ARGV[i]
  if redis.call("HSETNX", item_keys, key, owner) == 1 then
    out[#out + 1] = 1
  elseif redis.call("HGET", item_keys, key) == owner then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
