"""The whole production voice path once, in a real `longcall run` process: real speech from
samples/audio_night streamed by a member of the fake Discord's voice server (DAVE-encrypted Opus
over UDP) → discord.py's socket reader → `VoiceReceiver` (transport decrypt, DAVE, jitter, Opus)
→ the hearing pipeline (segmenter, faster-whisper tiny.en) → the transcript in Redis → the reply
policy (the wake word) → the brain (the OpenAI stub's chat completion, streamed) → TTS (the
stub's speech, a 440 Hz tone) → `Playback` → discord.py's `AudioPlayer` → UDP back to the fake
voice server, which opens it as a member's client would (transport, DAVE, Opus) and finds the tone.

Only Discord and OpenAI's models are played by fakes, at the network boundary
(tests/support/fake_discord.py, tests/support/openai_stub.py)."""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bot.voice.opus import OPUS_SILENCE, SAMPLE_RATE
from pipeline.adapters.av_audio import read_audio_file
from pipeline.adapters.redis_server import PrivateRedisServer
from pipeline.adapters.redis_store import RedisSessionStore
from pipeline.models import TurnKind
from tests.support.fake_discord import HUMANS, TOKEN, FakeDiscord
from tests.support.fake_voice_server import encode_discord_opus
from tests.support.openai_stub import OpenAIStub, Reply
from tests.support.waits import ProcessLog, RedisWatch

pytestmark = [pytest.mark.slow, pytest.mark.e2e_voice]

ROOT = Path(__file__).resolve().parent.parent
# "Hey Clanky, how many times has Bob died as Hulk tonight?"
QUESTION = ROOT / "samples" / "audio_night" / "22_alice.ogg"
ANSWER = "Six times, all of them as Hulk."
TTS_RATE = 24_000
TONE_HZ = 440.0


def _tone_pcm(seconds: float) -> bytes:
    t = np.arange(int(seconds * TTS_RATE)) / TTS_RATE
    return (np.sin(2 * np.pi * TONE_HZ * t) * 9000).astype("<i2").tobytes()


def _dominant_hz(pcm: np.ndarray[Any, Any]) -> float:
    left = pcm.reshape(-1, 2)[:, 0].astype(np.float64)
    spectrum = np.abs(np.fft.rfft(left * np.hanning(len(left))))
    return float(np.fft.rfftfreq(len(left), 1 / SAMPLE_RATE)[int(np.argmax(spectrum))])


async def test_spoken_question_is_heard_transcribed_answered_and_the_answer_opens_at_the_far_end(
    redis_server: PrivateRedisServer, tmp_path: Path
) -> None:
    guild = random.randrange(10**15, 10**16)
    sid = f"guild-{guild}"
    alice = HUMANS[0][0]
    discord = FakeDiscord([guild])
    await discord.start()
    store = RedisSessionStore.from_url(redis_server.url)
    watch = RedisWatch(redis_server.url)
    await watch.start()
    async with OpenAIStub() as stub:
        stub.default_speech_audio = _tone_pcm(1.0)
        stub.chat.append(Reply(text=ANSWER))  # the brain's answer (later calls: summaries, "ok")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DISCORD_TOKEN": TOKEN, "REDIS_URL": redis_server.url,
               "LONGCALL_DISCORD_API_BASE": discord.api_base, "LOG_FORMAT": "json", "LOG_LEVEL": "INFO",
               "DASHBOARD_PORT": "0", "OPENAI_API_KEY": "test-key-not-a-secret", "OPENAI_BASE_URL": stub.base_url,
               "REPLY_MODE": "brain", "RECALL_EMBEDDER": "off", "BOT_NAME": "Clanky",
               "OPENAI_SERVER_KIND": "openai"}  # the stub plays OpenAI's API (its reasoning-model rules)
        for name in ("REDIS_DATA_DIR", "SHARD_COUNT", "SHARD_IDS", "DISCORD_GUILD_IDS", "READ_TEXT_CHAT"):
            env.pop(name, None)
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", "run", cwd=tmp_path, env=env,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        log = ProcessLog(tmp_path / "bot.log")
        log.attach(proc)
        try:
            await discord.until("identified", lambda: bool(discord.live()), 90)
            await log.until("ready", lambda rows: any(e.get("event") == "discord_ready" for e in rows), 60)
            await discord.join(discord.live()[0], guild)
            await discord.until("the voice join", lambda: len(discord.voice) == 1
                                and bool(discord.voice[0].transitions_executed), 30)
            voice = discord.voice[0]
            await log.until("the session", lambda rows: any(e.get("event") == "guild_session_started"
                                                            for e in rows), 30)
            # Alice asks, as her Discord client sends it: op 5, DAVE-encrypted Opus, then silence frames.
            await voice.speaking(alice)
            speaker = voice.speakers[alice]
            pcm = read_audio_file(QUESTION, sample_rate=SAMPLE_RATE, channels=2)
            for opus in encode_discord_opus(pcm, flush=True):
                voice.send_to_bot(speaker.packet(opus))
            for _ in range(5):
                voice.send_to_bot(speaker.packet(OPUS_SILENCE, dave=False))

            async def answered() -> bool:
                turns = await store.get_turns(sid, 0, 20)
                return any(t.kind is TurnKind.BOT for t in turns)

            await watch.until("the spoken question and the bot's answer in the transcript", answered, 90)
            audio = voice.bot_audio
            await voice.until(lambda: len(audio.opus) >= 40, timeout=30)  # ~1 s of reply audio, opened
            turns = await store.get_turns(sid, 0, 20)
        except AssertionError as err:
            raise AssertionError(f"{err}\n--- bot ---\n{(tmp_path / 'bot.log').read_text()[-4000:]}") from None
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), timeout=30)
            await asyncio.wait_for(log.closed(), timeout=30)
            await watch.aclose()
            await store.aclose()
            await discord.close()
        chat_bodies = stub.bodies("/chat/completions")

    heard = [t for t in turns if t.kind is TurnKind.SPEECH]
    assert 1 == len(heard) and heard[0].speaker_id == str(alice)
    assert "clanky" in heard[0].text.lower() and "hulk" in heard[0].text.lower()  # Whisper heard her
    assert [ANSWER] == [t.text for t in turns if t.kind is TurnKind.BOT]
    assert any(heard[0].text in json_text(b) for b in chat_bodies)  # the brain got the transcribed question
    assert [] == audio.undecryptable  # transport and DAVE keys agree with the server's
    assert abs(TONE_HZ - _dominant_hz(audio.pcm())) < 10  # the stub's TTS, through the AudioPlayer
    assert [] == discord.errors and [] == voice.errors


def json_text(body: dict[str, Any]) -> str:
    return " ".join(str(m.get("content", "")) for m in body.get("messages", []))
