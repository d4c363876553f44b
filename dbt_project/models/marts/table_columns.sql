{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
        pre_hook="{{ paper_delta_delete('ref_paper_id') }}",
        meta={'paper_column': 'ref_paper_id'},
    )
}}

with lines as (
    select * from {{ ref('stg_table_columns') }}{{ paper_delta_filter('paper_id') }}
),

final as (
    select
        column_id,
        column_text,
        e.summary as column_summary,
        column_header_path,
        header_glossary,
        array_to_string(column_header_path, ' > ') as column_header,
        unit,
        col_index,
        num_values,
        table_id as ref_table_id,
        paper_id as ref_paper_id,
        page_id as ref_page_id,
        page_number,
        backend
    from lines
    {{ enrichment_join('column_summary', 'e', 'lines.column_id') }}
)

select * from final
