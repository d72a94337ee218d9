#!lua flags=allow-oom
-- allow-oom (see scripts.py): one claim per origin.
-- robots_claim.lua: read one origin's robots.txt record and, unless it is fresh, claim its
-- fetch (single flight across workers). A claim holds until its Unix ms deadline; the same
-- holder may claim again (extends it).
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] robots hash origin -> record   KEYS[2] robots_claims hash origin -> "until_ms holder"
-- ARGV[1] origin  ARGV[2] holder  ARGV[3] now (Unix ms)  ARGV[4] claim length (ms, > 0)
-- ARGV[5] largest record accepted (bytes)  ARGV[6] longest validity from now (ms, 24 h)
-- ARGV[7] "1": claim even if the record looks fresh (the caller could not read it)
-- Returns: {record, claimed}: record as stored (nil when missing; its length, an integer,
-- when larger than ARGV[5]: not sent); claimed 1 when the holder holds the claim now.
check_job()
local robots, claims = KEYS[1], KEYS[2]
local origin, holder, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local claim_ms, most_bytes, longest_ms = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local force = ARGV[7] == "1"
local rec = false
local n = redis.call("HSTRLEN", robots, origin)
if n > most_bytes then
  rec = n
elseif n > 0 then
  rec = redis.call("HGET", robots, origin)
  if not force then
    -- freshness from the header line; an unreadable header means stale (untrusted state)
    local head = string.match(rec, "^[^\n]*") or ""
    local expires = tonumber(string.match(head, '"expires_at_ms":(%d+)') or "0")
    if expires > now and expires - now <= longest_ms then return {rec, 0} end
  end
end
local cur = redis.call("HGET", claims, origin)
if cur then
  local until_ms, who = string.match(cur, "^(%d+) (.*)$")
  -- a value we cannot read is treated as a lapsed claim
  if until_ms and tonumber(until_ms) > now and who ~= holder then return {rec, 0} end
end
redis.call("HSET", claims, origin, (now + claim_ms) .. " " .. holder)
return {rec, 1}
