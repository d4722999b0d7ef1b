"""Redis commands a scale run sends inside a pipeline or a script, not as round trips of their own.

`benchmarks/bench_scale.py` and `benchmarks/bench_cluster.py` both leave these out when they count
round trips per turn from `INFO commandstats` (one module, so neither imports the other).
"""

from __future__ import annotations

INNER_COMMANDS: frozenset[str] = frozenset({
    "hget", "hset", "hmget", "get", "del", "zrem", "hdel", "hincrby", "zadd", "zcard", "zpopmin", "rpush",
    "lpop", "llen", "lrange", "set", "incr", "pexpire", "hexists",
})
