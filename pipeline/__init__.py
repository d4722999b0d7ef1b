"""longcall's Discord-free pipeline: transcript, compaction, context, hearing."""
