"""Screen notes from outside the voice call: `writer` (one note writer, vision model or offline
OCR, built from settings), `api` (the HTTP ingest endpoint on the bot's web app) and `watch`
(`longcall watch`, a player's own capture loop that posts to it). Slash commands for notes are
in `bot.cogs.notes`; the note buffer itself is `pipeline.transcript.screen_notes`."""
