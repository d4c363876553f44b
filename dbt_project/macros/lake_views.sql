{#-
  The lake as dbt reads it. Each source of `lake` (models/staging/_sources.yml) is a view in schema _lake over the
  Parquet files of its lake view: read_parquet('<lake>/<view>/**/*.parquet', union_by_name = true), the zero-row
  contract file included. The staging models (ephemeral: inlined into the marts) select from these.

  An incremental build (paper_delta.sql) loads only the changed papers' rows. Reading them through the glob would
  open every paper's file of the view (2,000 files at N = 2,000) to keep one paper's rows, so for the duration of an
  incremental build the view of every per-paper source (meta.per_paper) reads only the files of the papers it loads,
  listed by the planner in _paperlake.build_files (view, path), plus the contract file. lake_views_begin (on-run-start)
  sets the full view aside as <view>__full and puts the narrow one in its place; lake_views_end (on-run-end) puts the
  full view back. A build killed in between never reaches the live warehouse: it builds a side file that is swapped
  in only after dbt exits, and paperlake.warehouse.build.publish_build refuses a side file with a view still set aside.
  A renamed view keeps its SQL, so neither step reads a Parquet footer; a full build re-creates the views (the lake
  may have moved with its home).

  Only per-paper marts may read a per-paper source's staging model (they filter on the build's paper delta anyway);
  a mart over every paper (volumes) reads the per-paper marts.
-#}

{% macro lake_views_begin() -%}
    {%- if not execute -%}{%- do return('') -%}{%- endif -%}
    {%- set mode = paperlake_build_mode() -%}
    {%- set root = env_var('PAPERLAKE_LAKE', env_var('PAPERLAKE_HOME', '../data') ~ '/lake') -%}
    {%- set existing = _lake_views() -%}
    {%- do run_query('create schema if not exists _lake') -%}
    {%- if mode == 'full' -%}
        {#- the staging models were views in schema staging before they were ephemeral: a warehouse built then loses
            them with its first full build (a changed project builds in full) -#}
        {%- do run_query('drop schema if exists staging cascade') -%}
    {%- endif -%}
    {%- for source in graph.sources.values() if source.source_name == 'lake' -%}
        {%- set name = source.name -%}
        {%- set glob = _lake_literal(root ~ '/' ~ name ~ '/**/*.parquet') -%}
        {%- set full = "select * from read_parquet(" ~ glob ~ ", union_by_name = true)" -%}
        {%- if name ~ '__full' in existing and name not in existing -%}
            {#- a run cut short between its begin and end steps: put the full view back first -#}
            {%- do run_query('alter view _lake."' ~ name ~ '__full" rename to "' ~ name ~ '"') -%}
            {%- do existing.update({name: existing.pop(name ~ '__full')}) -%}
        {%- endif -%}
        {#- a full build re-creates every view (the files' columns may have changed with the contracts); any other
            run re-creates a missing one, or one over another lake (a home copied or moved) -#}
        {%- set aside = existing.get(name ~ '__full') -%}
        {%- if mode == 'full' or glob not in (aside or existing.get(name) or '') -%}
            {%- if aside is not none -%}{%- do run_query('drop view _lake."' ~ name ~ '__full"') -%}{%- endif -%}
            {%- do run_query('create or replace view _lake."' ~ name ~ '" as ' ~ full) -%}
            {%- do existing.update({name: glob}) -%}
            {%- do existing.pop(name ~ '__full', none) -%}
        {%- endif -%}
        {%- if mode == 'incremental' and source.meta.get('per_paper') -%}
            {%- set listed = run_query(
                "select path from _paperlake.build_files where view = '" ~ name ~ "' order by path"
            ).columns[0].values() | list -%}
            {%- if not listed and _paperlake_loads_papers() -%}
                {%- do exceptions.raise_compiler_error(
                    "lake source " ~ name ~ " is per-paper, but the build's planner listed no file of it for the "
                    ~ "papers it loads (paperlake.warehouse.build.plan_build writes one per view of paperlake.lake.views)"
                ) -%}
            {%- endif -%}
            {%- set files = [root ~ '/' ~ name ~ '/_contract/schema.parquet'] + listed -%}
            {%- set literals = [] -%}
            {%- for file in files -%}{%- do literals.append(_lake_literal(file)) -%}{%- endfor -%}
            {%- if name ~ '__full' not in existing -%}
                {%- do run_query('alter view _lake."' ~ name ~ '" rename to "' ~ name ~ '__full"') -%}
            {%- endif -%}
            {%- do run_query(
                'create or replace view _lake."' ~ name ~ '" as select * from read_parquet(['
                ~ literals | join(', ') ~ '], union_by_name = true)'
            ) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- do formula_lake_views(root) -%}
{%- endmacro %}


{% macro formula_lake_views(root) -%}
    {#- The formula graph's tables (source formula_lake, models/formulas/_sources.yml) as views in schema
        _formula_lake over their files in this home's lake, made again at the start of every command (five files'
        footers). The lake is named here, at run time, not in the source's definition: a path there is rendered
        when dbt parses the project, so every home's first build re-parsed the formula sources (~1 s of a build on
        the way to a queryable warehouse) instead of starting from the project's shared parse as it is. -#}
    {%- do run_query('create schema if not exists _formula_lake') -%}
    {#- a lake without the graph's files (a command run before any formula stage wrote its contract) gets no view:
        only the formula models read one, and they fail as they would on the missing file -#}
    {%- set present = run_query(
        'select parse_filename(file, true) from glob(' ~ _lake_literal(root ~ '/formulas/*.parquet') ~ ')'
    ).columns[0].values() | list -%}
    {%- for source in graph.sources.values() if source.source_name == 'formula_lake' -%}
        {%- set file = root ~ '/formulas/' ~ source.name ~ '.parquet' -%}
        {%- if source.name in present -%}
            {%- do run_query(
                'create or replace view _formula_lake."' ~ source.name ~ '" as select * from read_parquet('
                ~ _lake_literal(file) ~ ')'
            ) -%}
        {%- endif -%}
    {%- endfor -%}
{%- endmacro %}


{% macro lake_views_end() -%}
    {%- if not execute -%}{%- do return('') -%}{%- endif -%}
    {%- for name in _lake_views() if name.endswith('__full') -%}
        {%- set base = name[:-6] -%}
        {%- do run_query('drop view if exists _lake."' ~ base ~ '"') -%}
        {%- do run_query('alter view _lake."' ~ name ~ '" rename to "' ~ base ~ '"') -%}
    {%- endfor -%}
{%- endmacro %}


{% macro paperlake_build_mode() -%}
    {#- 'incremental' or 'full' during a warehouse build planned by paperlake.warehouse.build.plan_build, else none -#}
    {%- if not paperlake_build_is_planned() -%}{%- do return(none) -%}{%- endif -%}
    {%- do return('incremental' if paperlake_build_is_incremental() else 'full') -%}
{%- endmacro %}


{% macro _paperlake_loads_papers() -%}
    {%- do return(run_query("select count(*) from _paperlake.build_delta where load").columns[0].values()[0] > 0) -%}
{%- endmacro %}


{% macro _lake_views() -%}
    {#- name → SQL of the views in schema _lake -#}
    {%- set found = run_query(
        "select view_name, sql from duckdb_views() where database_name = current_database() and schema_name = '_lake'"
    ) -%}
    {%- set views = {} -%}
    {%- for row in found.rows -%}{%- do views.update({row[0]: row[1]}) -%}{%- endfor -%}
    {%- do return(views) -%}
{%- endmacro %}


{% macro _lake_literal(text) -%}
    {%- do return("'" ~ (text | replace("'", "''")) ~ "'") -%}
{%- endmacro %}
