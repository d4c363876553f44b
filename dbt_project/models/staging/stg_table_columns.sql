with source as (
    select * from {{ source('lake', 'table_columns') }}
),

renamed as (
    select
        column_id::uuid as column_id,
        table_id::uuid as table_id,
        paper_id::uuid as paper_id,
        page_id::uuid as page_id,
        page_number,
        col_index,
        column_header_path,
        unit,
        column_text,
        header_glossary,
        num_values,
        backend
    from source
)

select * from renamed
