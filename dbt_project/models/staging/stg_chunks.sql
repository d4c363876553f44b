with source as (
    select * from {{ source('lake', 'chunks') }}
),

renamed as (
    select
        chunk_id::uuid as chunk_id,
        paper_id::uuid as paper_id,
        page_id::uuid as page_id,
        page_number,
        ordinal,
        text_content,
        token_count,
        section_title,
        backend
    from source
)

select * from renamed
