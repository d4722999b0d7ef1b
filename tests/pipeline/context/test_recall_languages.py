"""Recall's BM25 side in other languages: German, Japanese and Arabic lines are found by their
words (the ASCII-only tokenizers read "Müller" and "Möller" as one word "ller", and Japanese as
none; Arabic's words with their clitics on shared no term with a question's)."""

from __future__ import annotations

from pipeline.context.recall import RecallConfig, build_query
from pipeline.context.recall_index import RecallIndex
from pipeline.text import Analyzer
from pipeline.wiring import text_analyzer
from tests.pipeline.context.test_recall import TEXT, question, turn

GERMAN_FILLER = [
    "Das Wetter ist heute wieder schlecht",
    "Ich muss gleich noch einkaufen gehen",
    "Hat jemand das Spiel gestern gesehen",
    "Mein Internet ist total langsam",
    "Wir sollten bald eine Pause machen",
    "Die Musik in der Lobby nervt",
]
JAPANESE_FILLER = [
    "今日は天気がいいですね",
    "昨日の試合を見ましたか",
    "ちょっとコーヒーを買ってきます",
    "このマップは広すぎる",
    "そろそろ休憩しようか",
    "音楽がずっと同じだね",
]


ARABIC_FILLER = [
    "الطقس جميل اليوم أخيراً",
    "هل شاهدتم المباراة أمس",
    "سأذهب لشراء القهوة بعد قليل",
    "الإنترنت عندي بطيء جداً",
    "يجب أن نأخذ استراحة قريباً",
    "الموسيقى في المقهى مزعجة",
]


def _index(lines: list[tuple[str, str]], analyzer: Analyzer = TEXT) -> RecallIndex:
    index = RecallIndex(analyzer)
    for seq, (speaker, text) in enumerate(lines):
        index.add_turn(turn(seq, speaker, text))
    return index


def _lexical_hits(index: RecallIndex, text: str, at: int) -> list[tuple[int | None, int | None]]:
    """(seq, lexical rank) of each hit for `text`, words only (no vectors)."""
    config = RecallConfig(neighbours=0, answer_turns=0)
    query = build_query(question(at, text, speaker="Bob"), (), known_speakers=index.speakers.keys(),
                        config=config, analyzer=index.analyzer)
    result = index.search(query, config, before_seq=at, budget_chars=1000)
    return [(h.seq, h.lexical_rank) for h in result.hits]


def test_a_german_line_is_found_by_its_words() -> None:
    lines = [("Alice" if i % 2 else "Maya", GERMAN_FILLER[i % len(GERMAN_FILLER)]) for i in range(60)]
    lines[12] = ("Alice", "Frau Möller bringt Salat")
    lines[20] = ("Maya", "Frau Müller bringt am Samstag den großen Kuchen mit")
    hits = _lexical_hits(_index(lines), "Was bringt Frau Müller?", at=60)
    assert hits and (20, 1) == hits[0]  # the shorter "Möller" line ranked first when both were "ller"


def test_a_japanese_line_is_found_by_its_characters() -> None:
    lines = [("Alice" if i % 2 else "Maya", JAPANESE_FILLER[i % len(JAPANESE_FILLER)]) for i in range(60)]
    lines[25] = ("Maya", "土曜日の七時に東京駅の北口で会おう")
    hits = _lexical_hits(_index(lines), "土曜日は東京駅の北口だっけ?", at=60)
    assert hits and (25, 1) == hits[0]


def test_an_arabic_line_is_found_by_its_stems() -> None:
    """"الغيتار" (the guitar) asks about "غيتاري" (my guitar): as lemmas they were two terms and
    the line passed no lexical floor; as stems (pipeline/text STEMMED) they are one."""
    lines = [("ليلى" if i % 2 else "يوسف", ARABIC_FILLER[i % len(ARABIC_FILLER)]) for i in range(60)]
    lines[18] = ("يوسف", "بعت غيتاري القديم بـ180 يورو")
    hits = _lexical_hits(_index(lines, text_analyzer("ar")), "بكم باع يوسف الغيتار القديم؟", at=60)
    assert hits and (18, 1) == hits[0]


def test_an_arabic_question_in_another_verb_form_finds_its_line() -> None:
    """"ما هي المدينة التي سينتقل إليها يوسف؟" (to which city will Youssef move?) asks about
    "سأنتقل إلى لايبزيغ" (I will move to Leipzig): the two verb forms are one term once the
    imperfect's prefix is off (data/ar/prefixes.txt), and so is the name "يوسف" ("وسف"), which the
    question's coverage leaves out as a speaker's name by its term, not by the word as written
    (compared as written, the name stayed in the coverage's mass and the line fell under the floor)."""
    lines = [("ليلى" if i % 2 else "يوسف", ARABIC_FILLER[i % len(ARABIC_FILLER)]) for i in range(60)]
    lines[18] = ("يوسف", "سأنتقل إلى لايبزيغ في أبريل")
    hits = _lexical_hits(_index(lines, text_analyzer("ar")), "ما هي المدينة التي سينتقل إليها يوسف؟", at=60)
    assert hits and (18, 1) == hits[0]
