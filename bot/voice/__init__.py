"""Discord voice, in the order a packet travels:

- `rtp`: what a packet is, transport decryption, drop reasons and counters, the SSRC map (pure).
- `jitter`: the per-SSRC reorder window, FEC / concealment at playout (pure).
- `packets`: `PacketProcessor`, datagram → DAVE decrypt → window → `VoiceFrame`s (pure).
- `opus`: the Opus decoders (libopus through ctypes, PyAV fallback).
- `receive`: the discord.py glue, `ReceivingVoiceClient` and `VoiceReceiver`.

Only `receive` imports discord.
"""
