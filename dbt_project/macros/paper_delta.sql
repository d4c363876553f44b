{#-
  Incremental warehouse builds (paperlake/warehouse/build.py, plan_build). Before dbt runs, the side file holds
  _paperlake.build_mode (incremental or not) and _paperlake.build_delta (paper_id, load): the papers whose rows this
  build replaces. A per-paper mart is an incremental model that deletes those papers' rows (paper_delta_delete, its
  pre-hook) and loads the rows of the papers marked `load` from the lake (paper_delta_filter); a full build
  (--full-refresh) rebuilds it whole. dbt's tests of a per-paper mart read the rows this build wrote
  (get_where_subquery below): the others were tested when they were written, and have not changed.
  A per-paper mart names its paper column in `meta.paper_column`.
-#}

{% macro paper_delta_filter(column) -%}
    {%- if is_incremental() %}
    where {{ column }} in (select paper_id from _paperlake.build_delta where load)
    {%- endif -%}
{%- endmacro %}


{% macro paper_delta_delete(column) -%}
    {%- if is_incremental() -%}
        delete from {{ this }} where {{ column }} in (select paper_id from _paperlake.build_delta)
    {%- endif -%}
{%- endmacro %}


{% macro get_where_subquery(relation) -%}
    {%- set where = config.get('where', '') -%}
    {%- set paper_column = paper_column_of(relation) if execute else none -%}
    {%- if paper_column and paperlake_build_is_incremental() -%}
        {%- set scoped = paper_column ~ " in (select paper_id from _paperlake.build_delta where load)" -%}
        {%- set where = "(" ~ where ~ ") and " ~ scoped if where else scoped -%}
    {%- endif -%}
    {%- if where -%}
        {%- do return("(select * from " ~ relation ~ " where " ~ where ~ ") dbt_subquery") -%}
    {%- else -%}
        {%- do return(relation) -%}
    {%- endif -%}
{%- endmacro %}


{% macro paper_column_of(relation) -%}
    {%- for node in graph.nodes.values() -%}
        {%- if node.resource_type == 'model' and (node.alias or node.name) == relation.identifier
              and node.config.materialized == 'incremental' -%}
            {%- do return(node.config.meta.get('paper_column')) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- do return(none) -%}
{%- endmacro %}


{% macro paperlake_build_is_planned() -%}
    {%- set found = run_query(
        "select count(*) from information_schema.tables where table_schema = '_paperlake' and table_name = 'build_mode'"
    ) -%}
    {%- do return(found.columns[0].values()[0] > 0) -%}
{%- endmacro %}


{% macro paperlake_build_is_incremental() -%}
    {%- if not paperlake_build_is_planned() -%}
        {%- do return(false) -%}
    {%- endif -%}
    {%- do return(run_query("select incremental from _paperlake.build_mode").columns[0].values()[0]) -%}
{%- endmacro %}
