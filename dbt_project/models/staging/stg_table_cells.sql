with source as (
    select * from {{ source('lake', 'table_cells') }}
),

renamed as (
    select
        cell_id::uuid as cell_id,
        table_id::uuid as table_id,
        paper_id::uuid as paper_id,
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
        backend
    from source
)

select * from renamed
