"""Deterministic ids: the venue key an unknown conference or year falls back to, the AirQA paper id the dataset's
``anchor_pdf`` holds, element ids as uuid5 of their names, and the content hashes."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest

from paperlake.lake.ids import element_id, normalise_title, page_id, paper_id, sha256_file, text_hash, venue_key


@pytest.mark.parametrize(
    ("conference", "year", "key"),
    [
        ("ACL", 2023, "acl2023"),
        ("EMNLP", "2024", "emnlp2024"),
        ("NeurIPS 2023", "", "neurips2023"),
        ("ACL", None, "acl"),
        ("ACL", 0, "acl"),
        ("Find-ings (ACL)", 2024, "findingsacl2024"),
        (None, 2023, "uncategorized"),
        ("", 2023, "uncategorized"),
        (None, None, "uncategorized"),
        ("!!", None, "uncategorized"),
        ("—", "", "uncategorized"),
    ],
)
def test_venue_key(conference, year, key: str) -> None:
    assert venue_key(conference, year) == key


def test_normalise_title_keeps_lower_case_letters_and_digits_only() -> None:
    assert normalise_title("LoRETTA: Low-Rank Economic Tensor-Train Adaptation") == (
        "lorettalowrankeconomictensortrainadaptation"
    )
    assert normalise_title("GPT-4 & T5 (2023)") == "gpt4t52023"
    assert normalise_title("Über ß") == "ber"
    assert normalise_title("") == ""


def test_paper_id_is_the_airqa_anchor_id() -> None:
    """tests/data/airqa_sample.jsonl names the NumeroLogic paper (EMNLP 2024) by this anchor_pdf."""
    title = "NumeroLogic: Number Encoding for Enhanced LLMs' Numerical Reasoning"
    assert paper_id(title, venue_key("EMNLP", 2024)) == "2bc5cd85-6e11-576a-8814-63a144001700"
    assert paper_id(title, "emnlp2024") == paper_id(title.upper().replace(" ", "  "), "emnlp2024")
    assert paper_id(title, "emnlp2024") != paper_id(title, "acl2024")
    assert paper_id(title, venue_key(None, 2024)) == str(
        uuid.uuid5(uuid.NAMESPACE_DNS, "numerologicnumberencodingforenhancedllmsnumericalreasoning-uncategorized")
    )


def test_element_ids_are_uuid5_of_their_names() -> None:
    assert element_id("p", "page", 3) == str(uuid.uuid5(uuid.NAMESPACE_DNS, "p_page_3"))
    assert element_id("p", "table", 2, "cell", 0) == str(uuid.uuid5(uuid.NAMESPACE_DNS, "p_table_2_cell_0"))
    assert element_id("p", "paper") == str(uuid.uuid5(uuid.NAMESPACE_DNS, "p_paper"))
    assert page_id("p", 3) == element_id("p", "page", 3) == "5b2d38d6-a823-595d-af49-e6730a46eb1f"
    assert page_id("p", 3) != page_id("p", 4)


def test_sha256_file_reads_in_chunks(tmp_path: Path) -> None:
    data = bytes(range(256)) * 41  # not a multiple of the chunk size
    path = tmp_path / "paper.pdf"
    path.write_bytes(data)
    expected = hashlib.sha256(data).hexdigest()
    assert sha256_file(path) == sha256_file(str(path), chunk_size=1000) == sha256_file(path, chunk_size=1) == expected
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    assert sha256_file(empty) == hashlib.sha256(b"").hexdigest()


def test_text_hash_is_sha256_of_utf8() -> None:
    assert text_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert text_hash("é") == hashlib.sha256("é".encode("utf-8")).hexdigest()
