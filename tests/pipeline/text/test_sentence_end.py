"""pipeline/text/sentence_end.py: a sentence end by Unicode's Sentence_Terminal, no word lists."""

from __future__ import annotations

import pytest

from pipeline.text.sentence_end import ends_sentence, sentence_terminals


@pytest.mark.parametrize(
    ("text", "ends"),
    [
        ("Hey Clanky, how many times has Bob died tonight?", True),
        ("That was a really good round, everyone.", True),
        ('He said "go!"', True),  # a closing quotation mark after the terminal
        ("Wow!)", True),
        ("今日は勝った。", True),  # the ideographic full stop
        ("हम जीत गए।", True),  # the Devanagari danda
        ("هل فزنا؟", True),  # the Arabic question mark
        ("So first we go to the", False),
        ("We need a tank,", False),
        ("And then...", False),  # trailing off: the ellipsis, spelled as three full stops
        ("And then…", False),  # U+2026 is no terminal
        ("", False),
        ("   ", False),
    ],
)
def test_a_sentence_ends_by_its_last_characters_unicode_property(text: str, ends: bool) -> None:
    assert ends == ends_sentence(text)


def test_the_terminals_are_unicodes_whole_list() -> None:
    terminals = sentence_terminals()
    assert {ord("."), ord("!"), ord("?"), 0x3002, 0x0964, 0x061F} <= terminals
    assert ord(",") not in terminals and 0x2026 not in terminals
    assert len(terminals) > 150  # every script's, not a handful typed in
