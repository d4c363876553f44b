"""The warehouse catalogue (`schemas.warehouse`) names each table's primary key as the marts' YAML declares it: the
key the agent reads rows by and the vector entities point back to."""

from __future__ import annotations

from schemas.warehouse import NEUSYM_TABLES, Column, Table, catalogue

# NeuSym-RAG's tables and the id each row is found by
NEUSYM_KEYS = {
    "metadata": "paper_id",
    "pages": "page_id",
    "sections": "section_id",
    "chunks": "chunk_id",
    "tables": "table_id",
    "images": "image_id",
    "equations": "equation_id",
    "reference": "reference_id",
}
COMPOSITE = {"formula_parameters", "enrichment_errors"}  # grain of several columns: no single key declared


def test_each_table_names_the_key_its_yaml_declares():
    tables = {t.name: t for t in catalogue()}
    assert set(NEUSYM_TABLES) <= set(tables)
    assert {name: tables[name].primary_key for name in NEUSYM_KEYS} == NEUSYM_KEYS
    for name, table in tables.items():
        declared = [c.name for c in table.columns if c.key]
        if name in COMPOSITE:
            assert declared == [], name
        else:
            assert declared == [table.primary_key], (name, declared)


def test_a_declared_key_is_found_wherever_it_stands():
    columns = (Column("title", "varchar"), Column("paper_id", "uuid", key=True))
    assert Table("t", "", columns).primary_key == "paper_id"
    assert Table("t", "", (Column("a", "int"), Column("b", "int"))).primary_key == "a"
