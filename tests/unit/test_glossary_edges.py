"""The glossary's rejection rules, each shown alone: a definition that is one of a list, one written with
"respectively", one that only repeats its label or has no word, and one read from a loose verb without quotes is
not taken, while the same sentence without that one flaw is."""

from __future__ import annotations

import pytest

from paperlake.parsing.glossary import MAX_DEFINITION_WORDS, MAX_LABEL_CHARS, MAX_LONG_WORDS, is_label, table_glossary

CAPTION = "Table 2: Results on the test set. {}"


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        ("PT: pre-training.", {"PT": "pre-training"}),
        ("FT and PT: fine-tuning and pre-training.", {}),  # a list: which part is whose is not written
        ("FT & PT: fine-tuning and pre-training.", {}),
        ("FT, PT: fine-tuning and pre-training.", {}),
        ("PT denotes pre-training.", {"PT": "pre-training"}),
        ("FT and PT denote fine-tuning and pre-training.", {}),
        ("PT: pre-training and fine-tuning respectively.", {}),  # one of a parallel list
        ("PT: pre-training and fine-tuning.", {"PT": "pre-training and fine-tuning"}),
        ("PT: PT.", {}),  # the label again
        ("Avg: avg.", {}),
        ("Avg: average.", {"Avg": "average"}),
        ("PT: 12.", {}),  # no word
        ("PT: an.", {}),  # no word of three letters
        ('"PT" = pre-training.', {"PT": "pre-training"}),
        ("PT means pre-training.", {"PT": "pre-training"}),
    ],
)
def test_caption_definitions_and_what_is_not_one(definition: str, expected: dict) -> None:
    assert table_glossary(["FT", "PT", "Avg"], CAPTION.format(definition), []) == expected


@pytest.mark.parametrize(
    ("paragraph", "expected"),
    [
        ("PT denotes pre-training.", {"PT": "pre-training"}),
        ("FT and PT denote fine-tuning and pre-training.", {}),
        ("FT & PT denote fine-tuning and pre-training.", {}),
        ("FT, PT denote fine-tuning and pre-training.", {}),
        ("PT denotes pre-training and fine-tuning respectively.", {}),
        ("PT denotes pre-training and fine-tuning.", {"PT": "pre-training and fine-tuning"}),
        ("PT denotes PT.", {}),
        ("Avg denotes avg.", {}),
        ("Avg denotes the average.", {"Avg": "average"}),
        ("PT denotes 1-2.", {}),
        ("PT means pre-training.", {}),  # a loose verb needs the label quoted
        ("'PT' means pre-training.", {"PT": "pre-training"}),
        ("PT represents pre-training.", {}),
        ("“PT” represents pre-training.", {"PT": "pre-training"}),
        ("PT stands for pre-training.", {"PT": "pre-training"}),
        ("PT refers to the pre-training.", {"PT": "pre-training"}),
        ("PT is short for pre-training.", {"PT": "pre-training"}),
        ("the pre-training and fine-tuning respectively (PT)", {}),
        ("the pre-training (PT)", {"PT": "pre-training"}),
        ("(PT)", {}),
    ],
)
def test_prose_definitions_and_what_is_not_one(paragraph: str, expected: dict) -> None:
    assert table_glossary(["PT", "Avg"], None, [paragraph]) == expected


def test_a_definition_is_cut_to_its_first_eight_words() -> None:
    assert MAX_DEFINITION_WORDS == 8
    words = "one two three four five six seven eight nine ten"
    eight = "one two three four five six seven eight"
    assert table_glossary(["PT"], CAPTION.format(f"PT: {words}."), []) == {"PT": eight}
    assert table_glossary(["PT"], None, [f"PT denotes {words}."]) == {"PT": eight}


def test_a_capitalised_name_before_a_symbol_label_is_at_most_four_words() -> None:
    assert MAX_LONG_WORDS == 4
    assert table_glossary(["5D"], None, ["results on Movie Reviews (5D)"]) == {"5D": "Movie Reviews"}
    assert table_glossary(["5D"], None, ["on the Big Movie Review Data Set (5D)"]) == {"5D": "Movie Review Data Set"}
    assert table_glossary(["5D"], None, ["we report reviews of Movie Reviews (5D)"]) == {"5D": "Movie Reviews"}


def test_schwartz_hearst_takes_the_shortest_run_that_holds_the_letters() -> None:
    assert table_glossary(["LM"], None, ["we use a large language model (LM) here"]) == {"LM": "language model"}
    assert table_glossary(["LLM"], None, ["a large language model (LLM)"]) == {"LLM": "large language model"}
    assert table_glossary(["LM"], None, ["a tiny model (LM)"]) == {}  # no word starting with l: not its definition


def test_only_the_tables_own_labels_are_looked_up() -> None:
    text = "PT denotes pre-training. FT denotes fine-tuning."
    assert table_glossary(["PT"], None, [text]) == {"PT": "pre-training"}
    assert table_glossary(["PT", "FT", "PT "], None, [text]) == {"PT": "pre-training", "FT": "fine-tuning"}
    assert table_glossary([], "Table 1: x. PT: pre-training.", [text]) == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ab", True),
        ("a" * MAX_LABEL_CHARS, True),
        ("a" * (MAX_LABEL_CHARS + 1), False),
        ("a", False),
        ("", False),
        (None, False),
        ("  ab  ", True),
        ("A&M", True),
        ("2D+", True),
        ("12", False),
    ],
)
def test_label_length_bounds(text, expected: bool) -> None:
    assert is_label(text) is expected
