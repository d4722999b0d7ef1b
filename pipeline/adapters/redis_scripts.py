"""The Lua scripts of the Redis session store (`redis_store`), one atomic step each.

Keys and fields are described in `redis_store`'s docstring; each script's comment gives its
KEYS, ARGV and result. Plain strings: registered by the store on its client.
"""

# KEYS turns, state, tids, tidq, owner, ofence; ARGV epoch ('' = unchecked), turn id ('' = no dedupe),
# payload, dedupe window, owner token ('' = unchecked), the least seq the caller expects (-1 =
# unchecked). Returns {seq, 1 if it was already stored}, {-1, stored epoch}, {-2, the lease
# holder} or {-3, next seq} when the store holds fewer turns than the caller saw stored (a
# promoted replica that missed the newest writes): nothing is written then.
APPEND = """
if ARGV[5] ~= '' then
  local holder = redis.call('GET', KEYS[5])
  local ofence = redis.call('GET', KEYS[6])
  -- No owner counter at all: the store lost the session (restarted empty); the epoch check
  -- below sends the holder to re-seed it instead of refusing it as a lost lease.
  if holder ~= ARGV[5] and (holder or (ofence and ofence ~= string.match(ARGV[5], '#(%d+)$'))) then
    return {-2, holder or ''}
  end
end
local meta = redis.call('HMGET', KEYS[2], 'epoch', 'base')
if ARGV[1] ~= '' and meta[1] ~= ARGV[1] then return {-1, meta[1] or ''} end
if ARGV[2] ~= '' then
  local seen = redis.call('HGET', KEYS[3], ARGV[2])
  if seen then return {tonumber(seen), 1} end
end
local next_seq = tonumber(meta[2] or '0') + redis.call('LLEN', KEYS[1])
if next_seq < tonumber(ARGV[6] or '-1') then return {-3, next_seq} end
local seq = tonumber(meta[2] or '0') + redis.call('RPUSH', KEYS[1], ARGV[3]) - 1
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[2], seq)
  if redis.call('RPUSH', KEYS[4], ARGV[2]) > tonumber(ARGV[4]) then
    redis.call('HDEL', KEYS[3], redis.call('LPOP', KEYS[4]))
  end
end
return {seq, 0}
"""

# KEYS turns, state; ARGV start, end (seqs). Returns {base, items}.
GET_TURNS = """
local base = tonumber(redis.call('HGET', KEYS[2], 'base') or '0')
local first = math.max(tonumber(ARGV[1]), base) - base
local last = tonumber(ARGV[2]) - base - 1
if last < first then return {base, {}} end
return {base, redis.call('LRANGE', KEYS[1], first, last)}
"""

# Compare-and-set: the fold commits only if the cursor is still the one it started from, the
# lock's fencing token is still ours (no successor took it), the store is our generation and
# (with an owner token) no other process acquired the session since. KEYS state, pnotes, pnote,
# fence, owner, ofence; ARGV ..., epoch, owner token, items JSON, then consumed note ids. Returns 1, 0
# (stale), -1 (epoch mismatch) or -2 (owner lease lost).
COMMIT_FOLD = """
if ARGV[8] ~= '' then
  local holder = redis.call('GET', KEYS[5])
  local ofence = redis.call('GET', KEYS[6])
  if holder ~= ARGV[8] and (holder or (ofence and ofence ~= string.match(ARGV[8], '#(%d+)$'))) then
    return -2
  end
end
if ARGV[7] ~= '' and redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[7] then return -1 end
local fence = tonumber(ARGV[6])
if fence > 0 and tonumber(redis.call('GET', KEYS[4]) or '0') ~= fence then return 0 end
local cur = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
if cur ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'summary', ARGV[2], 'cursor', ARGV[3], 'covered_through_turn', ARGV[4],
           'last_at', ARGV[5], 'failures', '0', 'next_retry_at', '0', 'items', ARGV[9])
for i = 10, #ARGV do
  redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('HDEL', KEYS[3], ARGV[i])
end
return 1
"""

# KEYS lock, fence; ARGV owner, ttl ms. Returns the fencing token, or 0 when held by another.
ACQUIRE_LOCK = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end
return 0
"""

RENEW_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

# Write back what a process still holds into a store that lost the session. Only if the store
# has no generation for it (another process may have re-seeded first). KEYS state, turns, tids,
# tidq, ofence; ARGV epoch, base, summary, cursor, covered_through_turn, last_at, items JSON, owner
# fence ('' = none: the owner lease's counter is written back if the store lost it), then (id, payload) pairs.
RESEED = """
if redis.call('HEXISTS', KEYS[1], 'epoch') == 1 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'base', ARGV[2], 'summary', ARGV[3], 'cursor', ARGV[4],
           'covered_through_turn', ARGV[5], 'failures', '0', 'next_retry_at', '0', 'items', ARGV[7])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'last_at', ARGV[6]) end
if ARGV[8] ~= '' then redis.call('SET', KEYS[5], ARGV[8], 'NX') end
for i = 9, #ARGV, 2 do
  local n = redis.call('RPUSH', KEYS[2], ARGV[i + 1])
  if ARGV[i] ~= '' then
    redis.call('HSET', KEYS[3], ARGV[i], tonumber(ARGV[2]) + n - 1)
    redis.call('RPUSH', KEYS[4], ARGV[i])
  end
end
return 1
"""

RECORD_FAILURE = """
local cur = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
if cur ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'failures', ARGV[2], 'next_retry_at', ARGV[3])
return 1
"""

# ARGV: max_pending, then (id, score, json) triples. Oldest notes beyond the bound are dropped
# and counted in state.notes_dropped so the loss is visible, never silent.
ADD_PENDING = """
local max_pending = tonumber(ARGV[1])
for i = 2, #ARGV, 3 do
  redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
end
local dropped = 0
local over = redis.call('ZCARD', KEYS[1]) - max_pending
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[1], over)
  for j = 1, #popped, 2 do
    redis.call('HDEL', KEYS[2], popped[j])
    dropped = dropped + 1
  end
  redis.call('HINCRBY', KEYS[3], 'notes_dropped', dropped)
end
return dropped
"""

# KEYS owner, ofence, meta; ARGV owner id, ttl ms. Returns {fence, previous owner id} or
# {0, holder} while another lease runs.
ACQUIRE_OWNER = """
local holder = redis.call('GET', KEYS[1])
if holder then return {0, holder} end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '#' .. fence, 'PX', ARGV[2])
local previous = redis.call('HGET', KEYS[3], 'owner') or ''
redis.call('HSET', KEYS[3], 'owner', ARGV[1])
return {fence, previous}
"""

# Renew the owner lease; a lease that lapsed with nobody acquiring since is taken back (also after
# the store restarted empty: no counter at all).
# KEYS owner, ofence; ARGV token, ttl ms. Returns 1, or 0 when another acquire came between.
RENEW_OWNER = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
local fence = string.match(ARGV[1], '#(%d+)$')
local ofence = redis.call('GET', KEYS[2])
-- No counter at all: the store restarted empty; the holder takes its lease (and counter) back.
if not holder and (ofence == fence or (not ofence and fence)) then
  if not ofence then redis.call('SET', KEYS[2], fence) end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# KEYS[1] = rvec. ARGV: model, then (key, base64) pairs. Another model's vectors go first.
SAVE_VECTORS = """
if redis.call('HGET', KEYS[1], 'model') ~= ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'model', ARGV[1])
end
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 1
"""

RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS[1] = cards. ARGV: (speaker id, card JSON) pairs. Replaces the whole hash in one step (a
# script, not MULTI: redis-py's cluster transactions fail oddly when a connection drops mid-way).
SAVE_CARDS = """
redis.call('DEL', KEYS[1])
for i = 1, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 1
"""

# Tombstones (issue 23): overwrite turns in place, their seqs kept. KEYS turns, state; ARGV
# (seq, payload) pairs. Seqs before the base or past the end are skipped. Returns how many were written.
TOMBSTONE = """
local base = tonumber(redis.call('HGET', KEYS[2], 'base') or '0')
local length = redis.call('LLEN', KEYS[1])
local written = 0
for i = 1, #ARGV, 2 do
  local index = tonumber(ARGV[i]) - base
  if index >= 0 and index < length then
    redis.call('LSET', KEYS[1], index, ARGV[i + 1])
    written = written + 1
  end
end
return written
"""

# A refold's summary replaces the running one while the cursor has not moved; the fence moves on
# so a fold in flight (started from the old summary) is refused at its commit. KEYS state, fence;
# ARGV expected cursor, summary, items JSON. Returns 1, or 0 when the cursor moved.
REPLACE_SUMMARY = """
local cur = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
if cur ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'summary', ARGV[2], 'items', ARGV[3])
redis.call('INCR', KEYS[2])
return 1
"""

# KEYS[1] = a list (the event log). ARGV: its new items. Replaces it in one step.
REPLACE_LIST = """
redis.call('DEL', KEYS[1])
for i = 1, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return #ARGV
"""

# An opt-out change (issue 37). KEYS optout set; ARGV user id, '1' (opt out) or '0' (opt in),
# channel. The set keeps its marker member (redis_keys.OPTOUT_KEPT) even when empty, and the
# change is published so the process serving the guild applies it at once.
SET_OPTOUT = """
redis.call('SADD', KEYS[1], ARGV[4])
if ARGV[2] == '1' then redis.call('SADD', KEYS[1], ARGV[1]) else redis.call('SREM', KEYS[1], ARGV[1]) end
redis.call('PUBLISH', ARGV[3], ARGV[5])
return 1
"""

# KEYS optout set; ARGV marker, then the user ids a process holds. Written back only when the
# set is missing altogether (the store restarted empty). Returns the members.
RESTORE_OPTOUT = """
if redis.call('EXISTS', KEYS[1]) == 0 and #ARGV > 1 then
  redis.call('SADD', KEYS[1], unpack(ARGV))
end
return redis.call('SMEMBERS', KEYS[1])
"""
