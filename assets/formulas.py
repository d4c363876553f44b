"""Formula stage: warehouse equations → a deduplicated formula graph (Parquet tables + RDF Turtle)."""

import dagster as dg

from orchestration.resources import PaperlakeResource
from paperlake.formulas.store import FORMULA_SCHEMAS, minilm_embedder, update_formula_graph
from paperlake.warehouse import connect_read_only

FORMULAS_CODE_VERSION = "formulas-1"
FORMULA_KEYS = {table: dg.AssetKey(["formulas", table]) for table in FORMULA_SCHEMAS}


@dg.multi_asset(
    specs=[dg.AssetSpec(key, deps=[dg.AssetKey(["warehouse", "equations"]), dg.AssetKey(["warehouse", "metadata"])],
                        kinds={"parquet", "sympy", "rdf"}, description=f"Formula graph table `{table}` "
                        f"(lake/formulas/{table}.parquet).") for table, key in FORMULA_KEYS.items()],
    group_name="formulas", code_version=FORMULAS_CODE_VERSION, pool="formulas",
)
def formula_graph(context: dg.AssetExecutionContext, paperlake: PaperlakeResource):
    """Display equations become formula entities (LaTeX → sympy → validated Python template, parameters,
    constants, provenance), merged across papers and volumes by canonical structure and by embedding similarity of
    their descriptions, with uses_constant / same_as / derived_from / specializes relations. Incremental: only
    papers whose equations changed are re-added, and each is compared against what exists. Also writes the RDF
    Turtle export ($PAPERLAKE_HOME/formulas/formulas.ttl)."""
    settings = paperlake.settings()
    with connect_read_only(settings.warehouse) as con:
        report = update_formula_graph(con, settings.lake / "formulas", settings.home / "formulas" / "formulas.ttl",
                                      embed=minilm_embedder())
    for error in report.errors[:20]:
        context.log.warning(error)
    summary = {"equations": report.equations, **report.counts, "papers_added": len(report.papers_added),
               "papers_removed": len(report.papers_removed), "papers_unchanged": report.papers_unchanged,
               "errors": len(report.errors), "seconds": round(report.seconds, 2)}
    for table, key in FORMULA_KEYS.items():
        yield dg.MaterializeResult(asset_key=key, metadata=summary if table == "formulas" else {
            "rows": report.counts.get(table.replace("formula_", ""), 0)})
