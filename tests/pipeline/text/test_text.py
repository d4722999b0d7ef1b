"""The text module (`pipeline/text/`): words of every script, stop words and suffix rules from
data files, and the lemmatiser port with simplemma's adapter behind it."""

from __future__ import annotations

import pickle
from importlib import resources

from pipeline.adapters.lemmas import SimplemmaLemmatizer
from pipeline.adapters.stems import SnowballStemmer
from pipeline.text import ENGLISH, Analyzer, NoLemmas, stop_words, strip_prefix, suffix_rules, tokens
from pipeline.wiring import text_analyzer


def test_letters_of_every_script_make_words() -> None:
    """ASCII-only tokenizers turned "Müller" into "ller" and Cyrillic into nothing."""
    assert ["frau", "müller", "kommt"] == tokens("Frau Müller kommt")
    assert ["cafetería"] == tokens("¡Cafetería!")
    assert ["strasse"] == tokens("STRASSE") == tokens("Straße")  # case folding, not lower()
    assert ["встретимся", "в", "пятницу", "у", "ивана"] == tokens("Встретимся в пятницу у Ивана.")
    assert ["हिन्दी", "भाषा"] == tokens("हिन्दी भाषा")  # vowel signs stay inside their word
    assert ["3pm", "2024"] == tokens("3pm, 2024")


def test_scripts_without_spaces_become_character_bigrams() -> None:
    assert ["東京", "京駅", "駅で", "で会", "会お", "おう"] == tokens("東京駅で会おう")
    assert ["猫"] == tokens("猫")
    assert ["土曜", "曜に", "bob"] == tokens("土曜に Bob")
    assert ["서울", "울에"] == tokens("서울에")


def test_apostrophes_follow_the_language() -> None:
    assert ["i", "dont", "know", "bobs"] == tokens("I don't know Bob’s")
    assert ["l", "homme"] == tokens("l'homme", "fr")
    assert ["o", "brien"] == tokens("O'Brien", contractions=False)
    assert ["abc", "def"] == tokens("abc123def", digits=False)


def test_stop_words_and_suffix_rules_are_data_files_naming_their_source() -> None:
    data = resources.files("pipeline.text") / "data" / "en"
    for name in ("stopwords.txt", "suffixes.txt"):
        header = (data / name).read_text(encoding="utf-8").splitlines()[0]
        assert header.startswith("# English") and "pipeline/context/recall.py" in header
    assert {"the", "earlier", "remember"} <= stop_words("en")
    assert "the" not in stop_words("de") and frozenset() == stop_words("xx")
    assert ("ing", 5, "") == suffix_rules("en")[0] and () == suffix_rules("ja")


def test_english_terms_are_recall_terms() -> None:
    """The analyzer reads English as recall always has: stop words out, lemma, then suffixes."""
    text = text_analyzer()
    assert ["buy", "green", "kayak", "last", "week"] == text.terms("I bought the green kayak last week")
    assert ["pack", "boxe", "9"] == ENGLISH.terms("packed the boxes at 9")  # light: the same on both sides
    assert "" == text.word_term("earlier")
    assert ["müller", "cafetería", "пятницу", "東京", "京駅"] == text.terms("Müller cafetería пятницу 東京駅")


def test_the_lemmatiser_is_a_port() -> None:
    german = Analyzer("de", SimplemmaLemmatizer(("de",)))
    assert ["kaufen"] == german.terms("gekauft")
    assert ["gekauft"] == Analyzer("de", NoLemmas()).terms("gekauft")
    assert ["東京"] == Analyzer("ja", SimplemmaLemmatizer(("ja",))).terms("東京")  # a language simplemma lacks
    assert "kaufen" == SimplemmaLemmatizer(("de",)).lemma("gekauft", "de")
    assert "gekauft" == SimplemmaLemmatizer(("en",)).lemma("gekauft", "de")  # not loaded: never loaded mid-call


def test_arabic_terms_are_stems_without_their_clitics() -> None:
    """Arabic writes the article, prepositions, conjunctions and possessives into the word: with
    simplemma's lemmas "للإيجار" (for the rent) and "الإيجار" (the rent), "بالقطار" (by train) and
    "قطاري" (my train), "الغيتار" and "غيتاري" shared no term, so a question in other words matched
    its statement by the embedder alone (eval/sets/languages dev2, docs/models.md)."""
    arabic = text_analyzer("ar")
    assert arabic.terms("للإيجار") == arabic.terms("الإيجار") == ["يجار"]  # "ايجار", its alif taken as a verb's prefix
    assert arabic.terms("بالقطار") == arabic.terms("قطاري") == ["قطار"]
    assert arabic.terms("الغيتار") == arabic.terms("غيتاري")
    assert arabic.terms("البندق") == ["بندق"]  # the stem replaces the lemma: no second strip ("ندق")
    assert [] == arabic.terms("أي")  # the stop list's "اي", once the hamza is normalised
    assert ["180"] == arabic.terms("بـ180")
    assert isinstance(arabic.stemmer, SnowballStemmer) and text_analyzer("de").stemmer is None
    assert ["kaufen"] == text_analyzer("de").terms("gekauft")  # German keeps its lemmas


def test_arabic_verb_forms_of_one_verb_share_a_term() -> None:
    """Snowball leaves the imperfect's person prefixes on ("سينتقل", he will move -> "ينتقل";
    "سأنتقل", I will move -> "انتقل"), so "to which city will Youssef move?" shared no word with
    "I'm moving to Leipzig" (eval/sets/languages dev3, docs/models.md). The prefix rules
    (`data/ar/prefixes.txt`: ي ت ن ا, ISRI's) take one off a stem longer than three letters."""
    arabic = text_analyzer("ar")
    assert arabic.terms("سينتقل") == arabic.terms("سأنتقل") == ["نتقل"]
    assert arabic.terms("تسجل") == arabic.terms("سأسجل") == ["سجل"]  # she registers / I will register
    assert arabic.terms("سيمتحن") == arabic.terms("امتحان") == ["متح"]  # he will be examined / an exam
    assert arabic.terms("تعمل") == arabic.terms("العمل") == ["عمل"]  # she works / the work
    assert ["اين", "قطار"] == arabic.terms("أين القطار")  # three letters stay whole; no prefix letter first
    assert ("ي", 3, "") == suffix_rules("ar", "prefixes")[0] and () == suffix_rules("de", "prefixes")
    rules = suffix_rules("ar", "prefixes")
    assert "نتقل" == strip_prefix("ينتقل", rules) and "يدي" == strip_prefix("يدي", rules)
    assert ["kaufen"] == text_analyzer("de").terms("gekauft") and ["tanken"] == ENGLISH.terms("tanken")


def test_a_stemmer_pickles_as_its_languages() -> None:
    arabic = Analyzer("ar", NoLemmas(), SnowballStemmer(("ar", "xx")))
    assert arabic.stemmer is not None and frozenset({"ar"}) == arabic.stemmer.languages
    again = pickle.loads(pickle.dumps(arabic))
    assert again.terms("بالقطار") == ["قطار"]
    assert "قطاري" == SnowballStemmer(("de",)).lemma("قطاري", "ar")  # a language not asked for: unchanged


def test_an_analyzer_pickles_without_the_words_it_has_seen() -> None:
    text = Analyzer("en")
    text.terms("zephyrine holdings")
    held = pickle.dumps(text)
    assert b"zephyrine" not in held
    assert ["zephyrine", "holding"] == pickle.loads(held).terms("zephyrine holdings")


def test_the_ascii_shortcut_reads_ascii_as_the_unicode_pattern_does() -> None:
    from pipeline.text import _LETTERS, _WORD

    for text in ("Bob_Smith said 3pm, x2y!", "don't", "A-B c.d", "  ", "MiXeD 42 words__here"):
        flat = text.casefold()
        assert _WORD.findall(flat) == tokens(text, contractions=False)
        assert _LETTERS.findall(flat) == tokens(text, digits=False, contractions=False)


def test_every_languages_data_file_names_its_source() -> None:
    """Each data file opens with a comment saying what it is and where it comes from (issue 39)."""
    from pipeline.text import DATA

    files = sorted(DATA.glob("*/*.txt"))
    assert {"ar", "de", "en", "ja", "pt"} <= {f.parent.name for f in files}
    for path in files:
        header = path.read_text(encoding="utf-8").splitlines()[0]
        assert header.startswith("# ") and len(header) > 40, path


def test_a_language_without_data_has_no_word_rules() -> None:
    """A language nobody wrote data for reads no words (its checks are the structural ones); a
    missing file of a language that has data is a mistake, said as one."""
    import pytest

    from pipeline.text import has_data, language_of, phrase_rule, word_set, word_table

    assert {} == word_table("fr", "numbers") and frozenset() == word_set("fr", "second_person")
    assert phrase_rule("de", "refusal_openers") is None and phrase_rule("en", "refusal_openers") is not None
    assert "9" == word_table("de", "numbers")["neun"] and "8" == word_table("pt", "numbers")["oito"]
    assert has_data("de", "negators") and not has_data("de", "second_person")
    with pytest.raises(FileNotFoundError, match="kind 'nosuch'"):
        word_table("en", "nosuch")
    assert "en" == language_of("auto", ["I think we should meet at the station"])
    assert "auto" == language_of("auto", ["Wir treffen uns am Bahnhof"]) and "de" == language_of("de", ["hi"])


def test_auto_reads_terms_as_english_and_leaves_the_language_to_each_batch() -> None:
    auto = text_analyzer("auto")
    assert "auto" == auto.language and ["buy", "kayak"] == auto.terms("I bought the kayak")
    assert "de" == text_analyzer("de").language and ["verabredung"] == text_analyzer("de").terms("die Verabredungen")
