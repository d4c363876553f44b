with source as (
    select * from {{ source('lake', 'table_rows') }}
),

renamed as (
    select
        row_id::uuid as row_id,
        table_id::uuid as table_id,
        paper_id::uuid as paper_id,
        page_id::uuid as page_id,
        page_number,
        row_index,
        row_header_path,
        row_text,
        header_glossary,
        num_values,
        backend
    from source
)

select * from renamed
