"""One conversation, composed from the stages before it: `session` (the ConversationSession:
the append lock, heard-turn listeners, the compactor task, recall and participant cards, close),
`store_sync` (turns and notes into the store in order, resync, re-seeding a store that lost
the session), `participant_cards`, `deps` (what a session is opened with), and
`model_context` (the one entry point for a model: reply messages or realtime instructions,
with recall, then a compaction trigger)."""
