"""The warehouse catalogue (`schemas.warehouse`) names each table's primary key as the marts' YAML declares it: the
key the agent reads rows by and the vector entities point back to."""

from __future__ import annotations

from schemas.warehouse import NEUSYM_TABLES, Column, Table, catalogue, declared_keys

COMPOSITE = {"formula_parameters", "enrichment_errors"}  # grain of several columns: no single key declared


def test_each_table_names_the_key_its_yaml_declares():
    from paperlake.vectors.entities import PRIMARY_KEYS

    tables = {t.name: t for t in catalogue()}
    for name, table in tables.items():
        declared = [c.name for c in table.columns if c.key]
        assert declared == ([] if name in COMPOSITE else [table.primary_key]), (name, declared)
    assert declared_keys() == {name: t.primary_key for name, t in tables.items() if name not in COMPOSITE}
    # the entities' own list (what search falls back on when the YAML cannot be read) says the same, for
    # NeuSym-RAG's tables and ours
    assert set(NEUSYM_TABLES) <= set(PRIMARY_KEYS)
    assert {name: tables[name].primary_key for name in PRIMARY_KEYS} == PRIMARY_KEYS
    assert tables["metadata"].primary_key == "paper_id" and tables["table_cells"].primary_key == "cell_id"


def test_a_declared_key_is_found_wherever_it_stands():
    columns = (Column("title", "varchar"), Column("paper_id", "uuid", key=True))
    assert Table("t", "", columns).primary_key == "paper_id"
    assert Table("t", "", (Column("a", "int"), Column("b", "int"))).primary_key == "a"


def test_a_probe_reads_its_evidence_row_by_the_declared_key():
    import duckdb

    from paperlake.evaluation.probes import verify

    con = duckdb.connect()
    con.execute("create table chunks (chunk_id varchar, text varchar)")
    con.execute("insert into chunks values ('c1', 'we train for 12 epochs'), ('c2', 'no number here')")
    con.execute("create table formula_parameters (formula_id varchar, symbol varchar)")
    con.execute("insert into formula_parameters values ('f1', 'alpha')")
    assert verify(con, {"table": "chunks", "column": "text", "row_id": "c1"}, 12)
    assert not verify(con, {"table": "chunks", "column": "text", "row_id": "c2"}, 12)
    # a table of several key columns names no single row: its evidence is never taken as verified
    assert not verify(con, {"table": "formula_parameters", "column": "symbol", "row_id": "f1"}, "alpha")
