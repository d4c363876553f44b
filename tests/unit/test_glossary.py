"""What a table's labels stand for: the three ways papers define them (caption, parenthesis, "denotes"), and what is
not a definition (a list, "respectively", a word-like label whose letters are missing, a setting such as "k=3")."""

from __future__ import annotations

import pytest

from paperlake.parsing.glossary import glossed, is_label, table_glossary


def test_caption_definitions_after_the_title_sentence():
    caption = (
        'Table 1: Accuracy (%) when intervening different heads. $" \\mathrm { o r i } " \\mathrm { : }$ : '
        "original model. $1 7 ^ { 2 2 } { \\mathrm { ; } }$ 22th head in 17th layer."
    )
    assert table_glossary(["ori", "1722", "2D+"], caption, []) == {
        "ori": "original model",
        "1722": "22th head in 17th layer",
    }


def test_the_title_sentence_defines_nothing():
    # "Results: accuracy ..." is the caption's title, not a definition of a label "Results"
    assert table_glossary(["Results"], "Table 2: Results: accuracy on the test set.", []) == {}


def test_parenthesis_symbol_labels_take_the_words_back_to_a_function_word():
    text = (
        "We make a 2-digit arithmetic dataset, including addition (2D+), subtraction (2D-), multiplication "
        "(2D\\*) and division (2D/). We analyse 1-digit (1D), 2-digit (2D) and 3- digit (3D) operations."
    )
    assert table_glossary(["2D+", "2D-", "2D*", "2D/", "1D", "3D"], None, [text]) == {
        "2D+": "addition",
        "2D-": "subtraction",
        "2D*": "multiplication",
        "2D/": "division",
        "1D": "1-digit",
        "3D": "3-digit",
    }


def test_parenthesis_word_labels_read_as_schwartz_and_hearst():
    text = (
        "We compare against the original model (ori) and Low-Rank Adaptation (LoRA), reported with the "
        "Tree-Edit-Distance based Similarity (TEDS)."
    )
    assert table_glossary(["ori", "LoRA", "TEDS"], None, [text]) == {
        "ori": "original model",
        "LoRA": "Low-Rank Adaptation",
        "TEDS": "Tree-Edit-Distance based Similarity",
    }


def test_a_word_label_whose_letters_are_not_there_is_not_defined():
    # "LI-QiLM" is not an abbreviation of "interferometry": no fallback for word-like labels
    assert table_glossary(["LI-QiLM"], None, ["inspired by interferometry (LI-QiLM)"]) == {}


def test_denotes_definitions_and_what_is_not_one():
    paragraphs = [
        '"inv" denotes the intervened model.',
        "FT stands for fine-tuning.",
        "DocHieNet represents the largest manually annotated dataset.",  # unquoted "represents"
        '"imp" and "coef" represent the importance and coefficient scores.',  # a list
        "A and B denote the first and second runs, respectively.",
    ]
    assert table_glossary(["inv", "FT", "DocHieNet", "coef", "B"], None, paragraphs) == {
        "inv": "intervened model",
        "FT": "fine-tuning",
    }


def test_caption_wins_over_the_text_and_the_first_definition_wins():
    caption = "Table 3: Scores. MR: Movie Review."
    assert table_glossary(["MR"], caption, ["multiple references (MR)"]) == {"MR": "Movie Review"}
    assert table_glossary(["NQ"], None, ["Natural Questions (NQ)", "New Quotes (NQ)"]) == {"NQ": "Natural Questions"}


@pytest.mark.parametrize(
    ("label", "numeric", "expected"),
    [
        ("2D+", False, True),
        ("Sparse-MeZO", False, True),
        ("Ambig.", False, True),
        ("1722", False, False),
        ("1722", True, True),
        ("k=3", False, False),
        ("two words", False, False),
        ("x", False, False),
        ("AVeryLongLabelName", False, False),
    ],
)
def test_what_counts_as_a_label(label, numeric, expected):
    assert is_label(label, numeric=numeric) is expected


def test_glossed_states_the_definition_beside_the_label():
    assert glossed("2D+", {"2D+": "addition"}) == "2D+ (addition)"
    assert glossed("BLEU", {"2D+": "addition"}) == "BLEU"


def test_a_label_cut_short_stands_for_the_prose_word_it_begins():
    """'Params' and 'Acc.' are words cut short: they stand for the prose's word they begin, when one word (with its
    inflections) is most of the words that begin so. A label the prose writes as a word, one whose beginning many
    words share, and one the prose writes once are not expanded; a definition the paper writes wins."""
    paragraphs = [
        "We count the parameters of each model: parameters are shared, and the parameter budget is small.",
        "Recall on recent data, and recognition of speech: recognition is hard.",
        "The accuracy of the baselines is reported; our accuracy is higher. The model is small, the models large.",
        "A rare tempest once.",
    ]
    glossary = table_glossary(["Params", "Rec", "Acc.", "Model", "Temp", "Dev"], None, paragraphs)
    assert glossary == {"Params": "parameters", "Acc.": "accuracy"}
    assert table_glossary(["Params"], None, ["Params denotes the trainable weights", "parameters, parameters"]) == {
        "Params": "trainable weights"
    }
