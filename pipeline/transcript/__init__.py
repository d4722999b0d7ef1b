"""Transcript: the session's notes, chat and events, cleaned and stored."""
