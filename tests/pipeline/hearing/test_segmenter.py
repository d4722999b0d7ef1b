"""Segmenter (and the audio conversion feeding it): synthetic audio in, utterances out; pure,
time from sample counts only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.adapters.av_audio import PcmResampler, read_audio_file, write_opus_ogg, write_wav
from pipeline.hearing.segmenter import Segmenter, SegmenterConfig, Utterance
from pipeline.hearing.vad import EnergyVad
from pipeline.pcm import TARGET_RATE, PcmFloat32, PcmInt16
from pipeline.testing.audio import ToneSpeech, frames

SPEECH = ToneSpeech([f"w{i}" for i in range(60)])
R = TARGET_RATE


def silence(seconds: float) -> PcmInt16:
    return np.zeros(round(seconds * R), dtype=np.int16)


def words(first: int, count: int) -> list[str]:
    return [f"w{i}" for i in range(first, first + count)]


def segmenter(**overrides: object) -> Segmenter:
    config = SegmenterConfig(**overrides)  # type: ignore[arg-type]
    return Segmenter(speaker_id="u1", speaker_name="Alice", vad=EnergyVad(), config=config)


def run(seg: Segmenter, pcm: PcmInt16, frame_samples: int = 320) -> list[Utterance]:
    out: list[Utterance] = []
    for frame in frames(pcm, frame_samples=frame_samples):
        out.extend(seg.feed(frame))
    return out


def test_one_utterance_with_times_from_sample_counts() -> None:
    """Speech between silences becomes one final utterance whose times come from sample counts."""
    speech = SPEECH.say(words(0, 5), gap_s=0.08)
    out = run(segmenter(pre_roll_ms=0), np.concatenate([silence(1.0), speech, silence(1.0)]))
    assert 1 == len(out)
    utterance = out[0]
    assert (True, "u1", "Alice") == (utterance.final, utterance.speaker_id, utterance.speaker_name)
    assert words(0, 5) == SPEECH.hear(utterance.pcm16k)
    speech_end = 1.0 + speech.size / R - 0.08  # the last word's trailing gap is silence
    assert 1.0 == pytest.approx(utterance.started_at, abs=0.035)
    assert speech_end == pytest.approx(utterance.ended_at, abs=0.035)


def test_short_pause_keeps_one_utterance_long_pause_splits() -> None:
    """A 400 ms pause stays inside the utterance; a 900 ms pause ends it (default 700 ms)."""
    pcm = np.concatenate([
        SPEECH.say(words(0, 3)), silence(0.4), SPEECH.say(words(3, 3)),
        silence(0.9), SPEECH.say(words(6, 3)), silence(1.0),
    ])
    out = run(segmenter(), pcm)
    assert [words(0, 6), words(6, 3)] == [SPEECH.hear(u.pcm16k) for u in out]


def test_end_of_transmission_ends_the_utterance_early_once_silence_is_heard() -> None:
    """When the sender stops transmitting after >= 200 ms of silence the utterance ends at once;
    with less silence it waits for the normal end-of-utterance silence."""
    seg = segmenter()
    assert [] == run(seg, np.concatenate([SPEECH.say(words(0, 3), gap_s=0.0), silence(0.1)]))
    assert [] == seg.end_transmission(200)  # 100 ms of silence: too little to trust
    assert [] == run(seg, silence(0.14))
    out = seg.end_transmission(200)
    assert [words(0, 3)] == [SPEECH.hear(u.pcm16k) for u in out]
    assert (False, []) == (seg.speaking, seg.end_transmission(200))


def test_end_of_utterance_fires_exactly_after_configured_silence() -> None:
    """The utterance is emitted once the configured silence has been fed, and not a window before."""
    seg = segmenter(end_of_utterance_ms=500)
    assert [] == run(seg, SPEECH.say(words(0, 3), gap_s=0.0))
    assert [] == seg.feed(silence(0.45))
    assert 1 == len(seg.feed(silence(0.1)))


def test_chunking_does_not_change_the_result() -> None:
    """Feeding 20 ms frames, 7-sample scraps or one buffer yields identical utterances."""
    pcm = np.concatenate([silence(0.5), SPEECH.say(words(0, 4)), silence(1.0), SPEECH.say(words(4, 2)),
                          silence(1.0)])
    results = [run(segmenter(), pcm, frame_samples=n) for n in (320, 7, pcm.size)]
    shapes = [[(u.started_at, u.ended_at, u.pcm16k.size) for u in r] for r in results]
    assert shapes[0] == shapes[1] == shapes[2]
    assert 2 == len(shapes[0])


def test_short_burst_is_discarded_and_counted() -> None:
    """A 120 ms click is not an utterance (min_speech_ms 250) but is counted as discarded."""
    seg = segmenter()
    click = SPEECH.say(["w7"])[: round(0.12 * R)]
    out = run(seg, np.concatenate([silence(0.5), click, silence(1.0)]))
    assert ([], 1) == (out, seg.discarded)


def test_long_speech_is_cut_at_a_pause_into_banked_pieces() -> None:
    """20 s of talking with short pauses is cut at max_utterance_s, at a pause, into non-final pieces
    followed by a final one; every word lands in exactly one piece and the pieces tile the time."""
    sentence_words = [words(6 * k, 6) for k in range(9)]
    pcm = np.concatenate([np.concatenate([SPEECH.say(w), silence(0.3)]) for w in sentence_words])
    out = run(segmenter(max_utterance_s=6.0), np.concatenate([pcm, silence(1.0)]))
    assert [False] * (len(out) - 1) + [True] == [u.final for u in out]
    assert list(range(len(out))) == [u.piece for u in out]
    assert [w for s in sentence_words for w in s] == [w for u in out for w in SPEECH.hear(u.pcm16k)]
    for before, after in zip(out, out[1:], strict=False):
        assert before.started_at + before.duration_s == pytest.approx(after.started_at, abs=1e-9)
    assert all(u.duration_s <= 6.0 + 1e-9 for u in out[:-1])


def test_long_utterance_is_cut_at_a_pause_for_partial_decoding() -> None:
    """Past partial_after_s, the next pause of partial_pause_ms cuts a non-final piece while the
    speaker goes on (Whisper starts on it at once); every word lands in exactly one piece, and
    with partial decoding off the same speech is one utterance."""
    sentence_words = [words(6 * k, 6) for k in range(4)]
    pcm = np.concatenate([np.concatenate([SPEECH.say(w), silence(0.4)]) for w in sentence_words])
    seg = segmenter(partial_after_s=2.0, partial_pause_ms=300, max_utterance_s=30.0)
    emitted_at: list[float] = []
    out: list[Utterance] = []
    for frame in frames(np.concatenate([pcm, silence(1.0)]), frame_samples=320):
        new = seg.feed(frame)
        out.extend(new)
        emitted_at.extend([seg.position_s] * len(new))
    assert [False] * (len(out) - 1) + [True] == [u.final for u in out]
    assert 3 <= len(out)
    assert [w for s in sentence_words for w in s] == [w for u in out for w in SPEECH.hear(u.pcm16k)]
    assert emitted_at[0] < pcm.size / R - 1.0  # the first part left while the speaker talked on
    assert emitted_at[0] - out[0].ended_at == pytest.approx(0.3, abs=0.07)  # 300 ms into the pause
    whole = run(segmenter(partial_after_s=0.0, max_utterance_s=30.0), np.concatenate([pcm, silence(1.0)]))
    assert [True] == [u.final for u in whole]


class LoudIsSpeech:
    """A detector that calls any audible window speech: isolates the segmenter's own logic."""

    window_samples = 512

    def probability(self, window: PcmFloat32) -> float:
        return 1.0 if float(np.abs(window).max()) > 0.01 else 0.0

    def reset(self) -> None:
        pass


def test_continuous_speech_without_pause_is_hard_cut_at_the_limit() -> None:
    """Speech with no pause at all is cut exactly at max_utterance_s, without losing samples."""
    tone: PcmFloat32 = (np.sin(np.arange(9 * R) * 2 * np.pi * 440 / R) * 0.3).astype(np.float32)
    pcm = np.concatenate([(tone * 32767).astype(np.int16), silence(1.0)])
    seg = Segmenter(speaker_id="u1", speaker_name="Alice", vad=LoudIsSpeech(),
                    config=SegmenterConfig(max_utterance_s=4.0, pre_roll_ms=0))
    out = run(seg, pcm)
    assert [False, False, True] == [u.final for u in out]
    assert [4.0, 4.0] == [round(u.duration_s, 2) for u in out[:2]]
    assert 9.0 == pytest.approx(sum(u.duration_s for u in out), abs=0.3)


def test_gap_without_packets_counts_as_silence() -> None:
    """When a speaker's packets stop, feed_silence ends the utterance and moves the stream clock."""
    seg = segmenter()
    assert [] == run(seg, SPEECH.say(words(0, 3)))
    before = seg.position_s
    out = seg.feed_silence(30 * R)
    assert 1 == len(out)
    assert before + 30.0 == pytest.approx(seg.position_s)
    later = run(seg, np.concatenate([SPEECH.say(words(3, 2)), silence(1.0)]))
    assert before + 30.0 == pytest.approx(later[0].started_at, abs=0.3)


def test_digital_silence_skips_the_detector() -> None:
    """All-zero windows (Discord silence frames, filled gaps) never reach the speech model."""

    class CountingVad:
        window_samples = 512
        calls = 0

        def probability(self, window: PcmFloat32) -> float:
            self.calls += 1
            return 0.0

        def reset(self) -> None:
            pass

    vad = CountingVad()
    seg = Segmenter(speaker_id="u1", speaker_name="Alice", vad=vad)
    seg.feed(silence(2.0))
    seg.feed(SPEECH.say(["w1"])[:512])
    assert 1 == vad.calls


def test_finish_closes_an_open_utterance() -> None:
    """End of stream emits the open utterance as final even without trailing silence."""
    seg = segmenter()
    assert [] == run(seg, SPEECH.say(words(0, 4)))
    out = seg.finish()
    assert [(True, words(0, 4))] == [(u.final, SPEECH.hear(u.pcm16k)) for u in out]
    assert [] == seg.finish()


def test_config_rejects_inconsistent_values() -> None:
    """A maximum length shorter than the end-of-utterance silence is refused at construction."""
    with pytest.raises(ValueError, match="max_utterance_s"):
        SegmenterConfig(end_of_utterance_ms=2000, max_utterance_s=1.0)


# -- the audio that feeds the segmenter (pipeline.adapters.av_audio) ------------------------------------


def _tone(freq: float, seconds: float, rate: int) -> PcmInt16:
    return (np.sin(np.arange(round(seconds * rate)) * 2 * np.pi * freq / rate) * 12000).astype(np.int16)


def _peak_hz(pcm: PcmInt16) -> float:
    spectrum = np.abs(np.fft.rfft(pcm.astype(np.float64)))
    return float(np.fft.rfftfreq(pcm.size, 1 / R)[int(np.argmax(spectrum))])


def test_discord_frames_become_16k_mono_with_duration_and_pitch_kept() -> None:
    """Fifty 20 ms frames of 48 kHz stereo make one second of 16 kHz mono at the same pitch."""
    resampler = PcmResampler()
    stereo = np.repeat(_tone(440.0, 1.0, 48_000), 2)
    out = [resampler.convert(stereo[i : i + 1920].tobytes()) for i in range(0, stereo.size, 1920)]
    mono = np.concatenate([*out, resampler.flush()])
    assert (R, 440.0) == (mono.size, round(_peak_hz(mono)))


def test_16k_mono_input_passes_through_unchanged() -> None:
    """Audio already at 16 kHz mono is not filtered at all."""
    pcm = _tone(300.0, 0.1, R)
    assert pcm.tolist() == PcmResampler(sample_rate=R, channels=1).convert(pcm.tobytes()).tolist()


@pytest.mark.parametrize("suffix", ["wav", "flac", "ogg"])
def test_audio_files_read_back_as_16k_mono(tmp_path: Path, suffix: str) -> None:
    """WAV, FLAC and Opus-in-Ogg files decode to 16 kHz mono of the length written, same pitch."""
    pcm = _tone(500.0, 2.0, 24_000)
    path = tmp_path / f"clip.{suffix}"
    if suffix == "ogg":
        write_opus_ogg(path, pcm, sample_rate=24_000)
    elif suffix == "wav":
        write_wav(path, pcm, sample_rate=24_000)
    else:
        import av

        with av.open(str(path), "w", format="flac") as container:
            stream = container.add_stream("flac", rate=24_000)
            frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = 24_000
            for packet in [*stream.encode(frame), *stream.encode(None)]:
                container.mux(packet)
    back = read_audio_file(path)
    assert 2.0 == pytest.approx(back.size / R, abs=0.03)
    assert 500.0 == pytest.approx(_peak_hz(back), abs=2.0)


def test_a_guess_point_comes_before_the_judged_pause_of_the_same_silence() -> None:
    """turn_guess_ms: the earlier pause (unjudged) and the judged one carry the same speech end
    and the same speech, each taken once; speech after the silence takes new ones."""
    seg = segmenter(turn_check_ms=128, turn_guess_ms=32)
    run(seg, np.concatenate([SPEECH.say(words(0, 3), gap_s=0.0), silence(0.05)]))
    guess = seg.take_pauses()
    run(seg, silence(0.1))
    judged = seg.take_pauses()
    assert ([False], [True]) == ([p.judged for p in guess], [p.judged for p in judged])
    assert guess[0].mark == judged[0].mark and guess[0].silence_ms < 64 <= judged[0].silence_ms
    assert SPEECH.hear(guess[0].utterance.pcm16k) == SPEECH.hear(judged[0].utterance.pcm16k) == words(0, 3)
    assert [] == seg.take_pauses()
    run(seg, np.concatenate([SPEECH.say(words(3, 2), gap_s=0.0), silence(0.2)]))
    again = seg.take_pauses()
    assert [False, True] == [p.judged for p in again] and again[0].mark > guess[0].mark


def test_without_a_guess_point_only_the_judged_pause_is_taken() -> None:
    seg = segmenter(turn_check_ms=128)
    run(seg, np.concatenate([SPEECH.say(words(0, 3), gap_s=0.0), silence(0.2)]))
    assert [True] == [p.judged for p in seg.take_pauses()]


@pytest.mark.parametrize("guess_ms", [128, 200, -1])
def test_a_guess_point_must_come_before_the_check(guess_ms: int) -> None:
    with pytest.raises(ValueError, match="turn_guess_ms"):
        SegmenterConfig(turn_check_ms=128, turn_guess_ms=guess_ms)
