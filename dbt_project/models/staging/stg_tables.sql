with source as (
    select * from {{ source('lake', 'tables') }}
),

renamed as (
    select
        table_id::uuid as table_id,
        paper_id::uuid as paper_id,
        page_id::uuid as page_id,
        page_number,
        ordinal,
        table_label,
        table_caption,
        table_content,
        bbox,
        num_rows,
        num_cols,
        header_rows,
        stub_columns,
        table_structure,
        detector,
        backend
    from source
)

select * from renamed
