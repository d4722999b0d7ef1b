"""Where the Redis store keeps a session: key names and lease values (no Redis calls here).

Keys use a hash tag (`lc:{session}:...`) so one session's keys stay on one cluster slot and
the Lua scripts can touch them together.

- `turns`   list, append-only. A turn's seq is `base` + its list position (RPUSH inside the
            append script returns the new length, so an append is one round trip and the
            seq is assigned atomically).
- `state`   hash: summary, cursor, covered_through_turn, last_at, failures, next_retry_at,
            notes_dropped, epoch (the session's generation, written at first open: a Redis
            that restarted empty no longer has it), base (first seq still held verbatim;
            > 0 only after a re-seed).
- `tids`    hash turn id -> seq, `tidq` list of those ids in append order: the dedupe window
            (the newest `DEDUPE_WINDOW` ids) that makes a retried append store once.
- `fence`   counter incremented on every lock acquire: the fencing token a commit checks.
- `pnotes`  sorted set of pending note ids by time, `pnote` hash id -> note JSON.
- `lnotes`  the live note buffer, one JSON list (small: at most 12 notes).
- `lock`    the in-flight fold lock, `SET NX PX` with an owner token; the holder renews it.
- `meta`    hash of free-form session metadata (the bot keeps the channel to rejoin, and
            `owner`: the owner id that last acquired the session).
- `owner`   the session owner lease: `<owner id>#<fence>`, `SET PX` with the TTL, renewed by
            the process serving the session. Appends and fold commits that carry an owner
            token are refused once another process acquired the session since (`ofence` moved
            past the token's fence, or the lease is someone else's): the fencing check. A lease
            that lapsed with nobody taking it (a long pause) is still the holder's to renew.
- `ofence`  counter incremented on every owner acquire: the owner lease's fencing token.
- `rnote`   hash note id -> note JSON: every screen note, kept for recall.
- `rvec`    hash recall key (`t:<seq>`, `n:<note id>`) -> base64 float16 vector, plus
            `model` (the embedder that made them).
- `cards`   hash speaker id -> participant card JSON.
- `events`  the session's event log (JSON per event), capped with LTRIM; the dashboard's
            timeline for sessions that are not live in this process.

Keys outside the per-session tag: `lc:sessions`, a sorted set of session ids by the time
they first saved meta -- the registry the dashboard lists; `lc:optout:<scope>`, a set of the
user ids that opted out of being recorded in a guild (a preference, not content: it outlives
the guild's session data, so an admin's wipe never opts anyone back in; `OPTOUT_KEPT` marks it
as written); changes are announced on the pub/sub channel `lc:optout-changed`; `lc:guild:<scope>`, a
hash of what an admin set for the guild with a slash command (`language`, bot/guild_language.py),
also kept apart from the session's data, read when a session starts. No command touches
them together with a session's keys, so under Redis Cluster (`REDIS_MODE=cluster`) every
command, script and transaction stays in one slot (docs/redis.md has the layout and the
failover story).
"""

from __future__ import annotations

from collections.abc import Mapping

SESSIONS_KEY = "lc:sessions"
VECTOR_PAGE = 500  # recall vectors per HSCAN page when a session reopens
LEASE_KEYS = ("lock", "owner")  # expire on their own TTL, never with the session's retention
_NAMES = ("turns", "state", "pnotes", "pnote", "lnotes", "lock", "meta", "events", "tids", "tidq", "fence",
          "owner", "ofence", "rnote", "rvec", "cards")


def session_keys(session_id: str) -> dict[str, str]:
    """Every key of one session, by name (one hash tag: one cluster slot)."""
    base = f"lc:{{{session_id}}}"
    return {name: f"{base}:{name}" for name in _NAMES}


def optout_key(scope: str) -> str:
    return f"lc:optout:{scope}"


def guild_settings_key(scope: str) -> str:
    return f"lc:guild:{scope}"


# Published (message: the scope) on every opt-out change, so the process serving the guild's
# session applies it at once (a plain channel: under Cluster it reaches every node's subscribers).
OPTOUT_CHANNEL = "lc:optout-changed"
# A member of every opt-out set written since issue 37, never a user id: the set exists even when
# everyone opted back in, so a set that is missing means the store lost it (restarted empty).
OPTOUT_KEPT = "~kept"


def ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def owner_id(token: str) -> str:
    """The owner id in a lease value `<owner id>#<fence>`."""
    return token.rpartition("#")[0] or token


def as_str(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def as_str_dict(fields: Mapping[bytes | str, bytes | str]) -> dict[str, str]:
    """The client decodes responses (decode_responses=True); this only narrows the type."""
    return {str(k): str(v) for k, v in fields.items()}
