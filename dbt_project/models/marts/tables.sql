{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
        pre_hook="{{ paper_delta_delete('ref_paper_id') }}",
        meta={'paper_column': 'ref_paper_id'},
    )
}}

with tables as (
    select * from {{ ref('stg_tables') }}{{ paper_delta_filter('paper_id') }}
),

final as (
    select
        table_id,
        table_caption,
        table_content,
        e.summary as table_summary,
        {{ int_bbox('bbox') }} as bounding_box,
        ordinal,
        paper_id as ref_paper_id,
        page_id as ref_page_id,
        page_number,
        table_label,
        num_rows,
        num_cols,
        header_rows,
        stub_columns,
        table_structure,
        detector,
        backend
    from tables
    {{ enrichment_join('table_summary', 'e', 'tables.table_id') }}
)

select * from final
