"""HD-RAG's second level, header matching: the three rules (equal word, prefix, Schwartz-Hearst abbreviation) and
what must not match (numbers by prefix, common words, short fragments)."""

from __future__ import annotations

from agent import header_match as hm


def q(text: str) -> list[str]:
    return [w for w in hm.words(text) if w not in hm._COMMON]


def test_equal_prefix_and_abbreviation_match():
    question = q("What F1-score does ELMo reach on MPQA with the original model on square roots?")
    assert hm.word_matches("elmo", question) and hm.word_matches("mpqa", question)
    assert hm.word_matches("ori", question)  # begins "original"
    assert hm.word_matches("sqrt", question)  # s(quare) r(oo)t(s): an abbreviation of two words
    assert hm.word_matches("f1", question)


def test_numbers_and_short_fragments_match_only_exactly():
    question = q("accuracy of head 1419 on 2-digit sums")
    assert hm.word_matches("1419", question)
    assert not hm.word_matches("141", question)  # a number never matches by prefix
    assert not hm.word_matches("14190", question)
    assert not hm.word_matches("ac", question)  # two letters are too short to be a prefix
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


def test_a_defined_label_is_stated_by_its_definition():
    question = q("What accuracy does the original model reach on two-digit addition?")
    glossary = hm.glossary_of(["2D+: addition", "ori: original model"])
    assert glossary == {"2D+": "addition", "ori": "original model"}
    assert hm.match(["2D+"], question, glossary).matched == 1  # by "addition"
    assert hm.match(["2D+"], question).matched == 0  # the label alone says nothing
    # a label and its definition are one header part: counted once, by whichever states more
    assert hm.match(["ori"], question, glossary) == hm.HeaderMatch(1, 1.0)


def test_numbers_are_compared_as_spoken_and_printed():
    question = q("When the 22nd attention head of layer 17 is intervened, on three-digit division?")
    assert hm.match(["1722"], question, {"1722": "22th head in 17th layer"}).matched == 4  # 22 head 17 layer
    assert hm.match(["3D"], question, {"3D": "3-digit"}).matched == 2  # 3, digit
    assert "1" not in q("which one is best")  # "one" stays a word


def test_rank_lines_reads_each_lines_glossary():
    lines = [
        (("table_rows", "a"), ["2D-"], 0, ["2D-: subtraction"]),
        (("table_rows", "b"), ["2D+"], 0, ["2D+: addition"]),
        (("table_rows", "c"), ["all"], 0),
    ]
    assert hm.rank_lines("accuracy on two-digit addition", lines) == [("table_rows", "b")]
