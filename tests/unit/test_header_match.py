"""HD-RAG's second level, header matching: the three rules (equal word, prefix, Schwartz-Hearst abbreviation) and
what must not match (numbers by prefix, common words, short fragments)."""

from __future__ import annotations

from agent import header_match as hm


def q(text: str) -> list[str]:
    return [w for w in hm.words(text) if w not in hm._COMMON]


def test_equal_prefix_and_abbreviation_match():
    question = q("What F1-score does ELMo reach on MPQA with the original model on square roots?")
    assert hm.word_matches("elmo", question) and hm.word_matches("mpqa", question)
    assert hm.word_matches("ori", question)            # begins "original"
    assert hm.word_matches("sqrt", question)           # s(quare) r(oo)t(s): an abbreviation of two words
    assert hm.word_matches("f1", question)


def test_numbers_and_short_fragments_match_only_exactly():
    question = q("accuracy of head 1419 on 2-digit sums")
    assert hm.word_matches("1419", question)
    assert not hm.word_matches("141", question)        # a number never matches by prefix
    assert not hm.word_matches("14190", question)
    assert not hm.word_matches("ac", question)         # two letters are too short to be a prefix
    assert not hm.word_matches("xqz", question)


def test_abbreviation_must_start_the_long_form():
    assert hm._abbreviates("sqrt", "squareroots")
    assert not hm._abbreviates("qrt", "squareroots")  # the first letter must start the long form
    assert not hm._abbreviates("strq", "squareroots")  # letters in order


def test_header_words_drop_common_words_and_lone_letters():
    assert hm.header_words(["Model / Dataset", "w/o GRU", "F1-SCORE"]) == ["gru", "f1"]


def test_rank_lines_orders_by_words_matched_then_share_then_table_rank():
    lines = [
        (("table_rows", "a"), ["ELMo"], 1),
        (("table_rows", "b"), ["ELMo"], 0),
        (("table_columns", "c"), ["MPQA", "Wiki"], 0),
        (("table_columns", "d"), ["MPQA", "ELMo"], 2),
        (("table_rows", "e"), ["BERT"], 0),
    ]
    ranked = hm.rank_lines("ELMo on MPQA?", lines)
    assert ranked == [("table_columns", "d"), ("table_rows", "b"), ("table_rows", "a"), ("table_columns", "c")]
