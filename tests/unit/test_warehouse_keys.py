"""The warehouse catalogue (`schemas.warehouse`) names each table's primary key as the marts' YAML declares it: the
key the agent reads rows by and the vector entities point back to."""

from __future__ import annotations

from schemas.warehouse import NEUSYM_TABLES, Column, Table, catalogue

COMPOSITE = {"formula_parameters", "enrichment_errors"}  # grain of several columns: no single key declared


def test_each_table_names_the_key_its_yaml_declares():
    from paperlake.vectors.entities import PRIMARY_KEYS

    tables = {t.name: t for t in catalogue()}
    for name, table in tables.items():
        declared = [c.name for c in table.columns if c.key]
        assert declared == ([] if name in COMPOSITE else [table.primary_key]), (name, declared)
    # the entities' own list (what search falls back on when the YAML cannot be read) says the same, for
    # NeuSym-RAG's tables and ours
    assert set(NEUSYM_TABLES) <= set(PRIMARY_KEYS)
    assert {name: tables[name].primary_key for name in PRIMARY_KEYS} == PRIMARY_KEYS
    assert tables["metadata"].primary_key == "paper_id" and tables["table_cells"].primary_key == "cell_id"


def test_a_declared_key_is_found_wherever_it_stands():
    columns = (Column("title", "varchar"), Column("paper_id", "uuid", key=True))
    assert Table("t", "", columns).primary_key == "paper_id"
    assert Table("t", "", (Column("a", "int"), Column("b", "int"))).primary_key == "a"
