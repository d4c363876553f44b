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
