with cells as (
    select * from {{ ref('stg_table_cells') }}
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
        paper_id as ref_paper_id
    from cells
)

select * from final
