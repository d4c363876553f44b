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
    select * from {{ ref('stg_table_rows') }}{{ paper_delta_filter('paper_id') }}
),

final as (
    select
        row_id,
        row_text,
        e.summary as row_summary,
        row_header_path,
        header_glossary,
        array_to_string(row_header_path, ' > ') as row_header,
        row_index,
        num_values,
        table_id as ref_table_id,
        paper_id as ref_paper_id,
        page_id as ref_page_id,
        page_number,
        backend
    from lines
    {{ enrichment_join('row_summary', 'e', 'lines.row_id') }}
)

select * from final
