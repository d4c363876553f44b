{#- The enrichment answer of one kind for each row: a left join on the row's id (see stg_enrichment). -#}
{% macro enrichment_join(kind, alias, id_expr) -%}
left join (
    select item_id, summary, tags from {{ ref('stg_enrichment') }} where status = 'ok' and kind = '{{ kind }}'
) as {{ alias }} on {{ alias }}.item_id = {{ id_expr }}
{%- endmacro %}
