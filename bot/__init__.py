"""longcall's Discord shell: entry point, settings, logging, client, voice, dashboard."""
