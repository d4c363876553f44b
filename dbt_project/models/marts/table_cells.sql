{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
        pre_hook="{{ paper_delta_delete('ref_paper_id') }}",
        meta={'paper_column': 'ref_paper_id'},
    )
}}

with cells as (
    select * from {{ ref('stg_table_cells') }}{{ paper_delta_filter('paper_id') }}
),

final as (
    select
        cell_id,
        table_id as ref_table_id,
        row_index,
        col_index,
        rowspan,
        colspan,
        cell_text,
        is_header,
        is_stub,
        column_header_path,
        row_header_path,
        number_value,
        number_flags,
        unit,
        paper_id as ref_paper_id
    from cells
)

select * from final
