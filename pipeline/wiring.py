"""The composition module: which adapter serves each port a stage declares.

Stages never import an adapter and adapters never import a stage (`tests/test_layout.py`);
they meet here and in `bot/`, the only places that import both. What a stage needs from
an outside library comes in as a port (`pipeline/ports.py`) or a parameter:

- hearing: each speaker stream's speech detector (Silero over `onnx_runtime`, or the energy
  detector) and resampler (`av_audio.PcmResampler`): `stream_parts`, `hearing_pipeline`;
- evaluation: the same, plus the audio file reader (`av_audio.read_audio_file`) for an
  audio session replay: `audio_replay`;
- screen notes: the image decoder (`images.decode_image`), passed to `NoteWriter` by its
  makers in `bot/notes/`;
- recall's terms: the text module's `Analyzer` (`pipeline/text/`) with simplemma's lemmatiser
  (`lemmas.SimplemmaLemmatizer`), and Snowball's stems where the language is `STEMMED`
  (`stems.SnowballStemmer`): `text_analyzer`, passed to the session as `ConversationDeps.text`.
"""

from __future__ import annotations

from functools import cache

from pipeline.adapters.av_audio import PcmResampler, read_audio_file
from pipeline.adapters.lemmas import ENGLISH_LEMMAS, SimplemmaLemmatizer
from pipeline.adapters.onnx_runtime import silero_session
from pipeline.adapters.stems import SnowballStemmer
from pipeline.evaluation.audio_replay import AudioReplay, SettableClock
from pipeline.events import EventEmitter
from pipeline.hearing.pipeline import HearingConfig, HearingPipeline
from pipeline.hearing.streams import StreamParts
from pipeline.hearing.vad import EnergyVad, SileroVad, SpeechDetector, VadKind
from pipeline.ports import Clock, Transcriber, TurnPredictor, TurnSink
from pipeline.text import AUTO, STEMMED, Analyzer


@cache
def text_analyzer(language: str = "en") -> Analyzer:
    """The process's one analyzer for `language` (its term cache and dictionary shared by every
    session): the text module's tokens and stop words, simplemma's lemmas. `language` is
    CONVERSATION_LANGUAGE (`auto`: English's terms, each batch's checks in its own language)."""
    lemmatizer = ENGLISH_LEMMAS if language in ("en", AUTO) else SimplemmaLemmatizer((language,))
    stemmer = SnowballStemmer((language,)) if language in STEMMED else None  # Arabic: docs/text.md
    return Analyzer(language, lemmatizer, stemmer)


def make_detector(kind: VadKind | str) -> SpeechDetector:
    """A fresh detector for one speaker stream."""
    kind = VadKind(kind)
    if kind is VadKind.SILERO:
        return SileroVad(silero_session())
    return EnergyVad()


def stream_parts(kind: VadKind | str, turn_model: TurnPredictor | None = None) -> StreamParts:
    """Each stream's detector (of `kind`) and resampler (PyAV's), and the turn model if any."""
    kind = VadKind(kind)
    return StreamParts(detector=lambda: make_detector(kind), resampler=PcmResampler, turn_model=turn_model)


def hearing_pipeline(
    transcriber: Transcriber,
    sink: TurnSink,
    *,
    events: EventEmitter,
    clock: Clock,
    config: HearingConfig | None = None,
    turn_model: TurnPredictor | None = None,
) -> HearingPipeline:
    """The hearing pipeline with the production detector (`config.vad`) and resampler, and the
    turn model when there is one (`pipeline.adapters.smart_turn.SmartTurnModel`)."""
    config = config or HearingConfig()
    return HearingPipeline(transcriber, sink, events=events, clock=clock, config=config,
                           parts=stream_parts(config.vad, turn_model))


def audio_replay(
    transcriber: Transcriber,
    *,
    events: EventEmitter,
    clock: SettableClock,
    config: HearingConfig | None = None,
) -> AudioReplay:
    """An audio session replay through the production hearing path, clips read with PyAV."""
    config = config or HearingConfig()
    return AudioReplay(transcriber, events=events, clock=clock, config=config, parts=stream_parts(config.vad),
                       read_audio=read_audio_file)
