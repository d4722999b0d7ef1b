"""Regenerate samples/audio_night/: a four-speaker gaming night as Opus clips + session.jsonl.

    .venv/bin/python samples/make_audio_session.py [--out samples/audio_night]

Voices: hibari-tts's bundled "heart" voice (the only one available offline), turned into
four distinguishable people by editing the synthesis parameters rather than the waveform:
the pitch track (f0) is scaled and the spectral envelope is warped along the frequency axis
(a formant shift), so Bob and James sound like lower, larger voices and Maya like a higher
one, without the chipmunk artefacts of resampling tricks. Speed differs per speaker too.

Deterministic: a fixed seed per clip, so rerunning produces the same audio (modulo libopus
versions). The reference `text` sits beside each clip in session.jsonl.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pipeline.adapters.av_audio import resample, write_opus_ogg
from pipeline.pcm import to_int16

BOT_NAME = "Clanky"
CLIP_RATE = 24_000  # hibari's native rate; libopus takes it directly
BITRATE = 24_000
SENTENCE_PAUSE_S = 0.3


@dataclass(frozen=True, slots=True)
class Voice:
    speaker_id: str
    f0_scale: float  # pitch
    formant_scale: float  # < 1 lowers the formants: a "larger" vocal tract
    speed: float
    gain_db: float  # people sit at different distances from their microphones


VOICES = {
    "Alice": Voice("u1", 1.0, 1.0, 1.0, -20.0),
    "Bob": Voice("u2", 0.55, 0.85, 1.0, -18.0),
    "James": Voice("u3", 0.7, 0.9, 1.1, -22.0),
    "Maya": Voice("u4", 1.2, 1.06, 0.95, -19.0),
}

# (kind, speaker, text, gap): gap is seconds of silence before the clip starts, counted from
# the end of the previous clip; a negative gap starts it before the previous one ends (the
# overlapping pair). Contractions are spelled out so the reference matches what is said.
SCRIPT: list[tuple[str, str, str, float]] = [
    ("join", "Alice", "", 0.5),
    ("join", "Bob", "", 0.0),
    ("join", "James", "", 0.0),
    ("turn", "Alice", "Okay everyone, I just queued us up for a quick play match.", 0.5),
    ("turn", "Bob", "Nice. I am going to play Hulk again tonight, so do not complain.", 0.6),
    ("turn", "James", "Bob, you died as Hulk five times last game. Maybe try someone else.", 0.5),
    ("turn", "Bob", "That was not my fault. Our healers were nowhere near me.", 0.7),
    ("turn", "Alice", "I will play a healer and stay right behind you this time.", 0.6),
    ("note", "James", "James is sharing Marvel Rivals: Tokyo map, character select, Bob locked in Hulk", 0.5),
    ("turn", "James", "The map is Tokyo. We are attacking first, so we need to push the payload together.", 0.5),
    ("join", "Maya", "", 0.8),
    ("turn", "Maya", "Hey guys, sorry I am late. Did I miss anything important?", 0.6),
    ("turn", "Alice", "Not really. We just started our first round on the Tokyo map.", 0.5),
    ("turn", "Maya", "Cool. I will take the strategist slot if nobody else wants it.", 0.7),
    ("turn", "Bob", "Wait, there is a sniper on the roof to the left. Watch out.", 0.6),
    ("turn", "James", "I see him. I am going to jump up there and take him out.", 0.5),
    # The overlapping pair: Maya warns James while he is still talking.
    ("turn", "Maya", "Careful James, their tank is right behind the corner.", -1.8),
    ("turn", "Alice", "Everyone group up on the payload, the enemy team is coming back.", 0.8),
    ("turn", "Bob", "I just died again. They focused me the moment I jumped in.", 0.6),
    ("turn", "James", "Group up on me, right now.", 0.4),
    ("turn", "James", "Of course you did. That is six deaths as Hulk tonight.", 0.5),
    ("turn", "Maya", "Bob, try waiting for us before you jump into the middle of their team.", 0.6),
    ("turn", "Bob", "Fine, I will wait for the team next time. I promise.", 0.7),
    ("turn", "Alice", "We won the first round. The payload reached the final checkpoint.", 0.6),
    ("turn", "Maya", "Good job everyone. Should we swap sides or play another map after this one?", 0.5),
    ("turn", "James", "Let us finish this match first and then decide. I need a drink of water.", 0.6),
    ("turn", "Alice", "Hey Clanky, how many times has Bob died as Hulk tonight?", 0.8),
    ("bot", BOT_NAME, "By my count, six times, all of them as Hulk.", 0.4),
    ("turn", "Bob", "Do not answer that. It is embarrassing enough already.", 0.5),
    ("turn", "Alice", "Okay, here is the plan. Bob goes in only after Maya calls it, and James stays "
     "on the high ground.", 0.7),
    ("turn", "Maya", "The defense round is starting. I will stay near the back and heal.", 0.7),
    ("turn", "James", "Two enemies on the bridge. I am going to hold this corner for now.", 0.5),
    ("turn", "Bob", "Okay, I am holding back this time. Tell me when to go in.", 0.6),
    ("turn", "Alice", "Now Bob, go now. Their healer is out of position.", 0.5),
    ("turn", "Maya", "That was a great play. We held them at the first point for the whole round.", 0.6),
]


def _warp(envelope: npt.NDArray[np.float32], alpha: float) -> npt.NDArray[np.float32]:
    """Stretch a [bins, frames] envelope along frequency: bin k takes the value of bin k/alpha."""
    bins = envelope.shape[0]
    src = np.clip(np.arange(bins) / alpha, 0, bins - 1)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, bins - 1)
    w = (src - lo)[:, None]
    warped: npt.NDArray[np.float32] = (envelope[lo] * (1 - w) + envelope[hi] * w).astype(np.float32)
    return warped


def _trim(audio: npt.NDArray[np.float32], margin_s: float = 0.08) -> npt.NDArray[np.float32]:
    """Cut a sentence's leading and trailing near-silence (40 dB below its peak)."""
    loud = np.flatnonzero(np.abs(audio) > np.abs(audio).max() * 0.01)
    if loud.size == 0:
        return audio
    margin = int(margin_s * 24_000)
    return audio[max(0, loud[0] - margin) : loud[-1] + margin]


def synthesize(tts: object, text: str, voice: Voice, seed: int) -> npt.NDArray[np.float32]:
    """hibari's pipeline with the f0 track and the envelopes edited before the vocoder."""
    from hibari import dsp

    rng = np.random.default_rng(seed)
    parts = []
    for phonemes in tts.phonemize(text):  # type: ignore[attr-defined]
        ids = tts.ids(phonemes)  # type: ignore[attr-defined]
        out = tts.sess.run(  # type: ignore[attr-defined]
            None, {"ids": np.asarray([ids], np.int64), "speed": np.asarray([voice.speed], np.float32)}
        )
        lh, th, ln, lr, phi, f0 = (o[0] for o in out)
        if voice.formant_scale != 1.0:
            lh, th, ln, lr, phi = (_warp(x, voice.formant_scale) for x in (lh, th, ln, lr, phi))
        parts.append(_trim(dsp.synth(lh, th, ln, lr, phi, f0 * voice.f0_scale, rng)))
    # hibari leaves ~0.7 s between sentences, right at the end-of-utterance threshold;
    # people chatting pause for a third of that.
    pause = np.zeros(int(SENTENCE_PAUSE_S * tts.sample_rate), np.float32)  # type: ignore[attr-defined]
    audio = np.concatenate([x for part in parts for x in (part, pause)][:-1]).astype(np.float32)
    rms = float(np.sqrt(np.mean(audio**2))) or 1.0
    scaled: npt.NDArray[np.float32] = (audio * (10 ** (voice.gain_db / 20) / rms)).astype(np.float32)
    return scaled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "audio_night")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.ogg"):
        old.unlink()

    from hibari import Hibari

    tts = Hibari()
    lines: list[dict[str, object]] = [
        {"type": "session", "bot_name": BOT_NAME, "title": "Marvel Rivals night (audio)"}
    ]
    clock = 0.0  # end of the previous clip
    previous_start = 0.0
    clip_no = 0
    for kind, speaker, text, gap in SCRIPT:
        t = round(max(previous_start + 0.5, clock + gap), 2)
        if kind == "join":
            lines.append({"type": "join", "t": t, "speaker": speaker})
            clock = t
            continue
        if kind == "note":
            lines.append({"type": "note", "t": t, "by": speaker, "text": text})
            continue
        if kind == "bot":
            lines.append({"type": "turn", "t": t, "speaker": speaker, "role": "assistant", "text": text})
            clock = t + 0.06 * len(text)  # roughly how long the bot's TTS would talk
            continue
        clip_no += 1
        voice = VOICES[speaker]
        audio = synthesize(tts, text, voice, seed=clip_no)
        pcm = to_int16(audio)
        name = f"{clip_no:02d}_{speaker.lower()}.ogg"
        write_opus_ogg(out / name, resample(pcm, sample_rate=tts.sample_rate, target_rate=CLIP_RATE),
                       sample_rate=CLIP_RATE, bitrate=BITRATE, encode_rate=CLIP_RATE)
        seconds = len(pcm) / tts.sample_rate
        lines.append({"type": "turn", "t": t, "speaker": speaker, "speaker_id": voice.speaker_id,
                      "audio": name, "text": text})
        print(f"{name}  t={t:6.2f}  {seconds:4.1f}s  {speaker}: {text}")
        previous_start = t
        clock = max(clock, t + seconds)
    with (out / "session.jsonl").open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"{clip_no} clips, {clock:.1f} s session, {size / 1024:.0f} KiB in {out}")


if __name__ == "__main__":
    main()
