"""A guild's voice session, one concern per module. In flow order:

    registry.py         the process's guild sessions: /join, resume on startup, orphans, leases
    opening.py          one session opened: conversation from the store, language, privacy state
    config.py           GuildSessionConfig, the frozen SessionDeps built in bot/session_deps.py, StopReason
    ports.py            what a session talks to: brain, speech, hearing, the voice link
    guild_session.py    the coordinator: builds the parts below, runs their tasks, shuts down
    core.py             what the parts share: ids, conversation, stop signal, owner lease, append
    hearing_feed.py     voice frames → barge-in check → hearing; heard turns → append → reply desk
    barge_in.py         the reply on air, stopped when the addressed speaker talks over it
    reply_jobs.py       which turns get a reply, the reply worker, stale/dropped bookkeeping
    replier.py          the Replier protocol, picked once per session:
    brain_replier.py        brain → sentences → TTS → playback (or a text answer)
    realtime_replier.py     the realtime speech model → playback
    presence.py         who is here, moves, limits, the voice reconnect
    chat_intake.py      typed chat turns and their corrections
"""
