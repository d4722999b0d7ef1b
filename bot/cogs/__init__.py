"""discord.py cogs: the slash commands and gateway listeners."""
