with source as (
    select * from {{ source('lake', 'sections') }}
),

renamed as (
    select
        section_id::uuid as section_id,
        paper_id::uuid as paper_id,
        section_title,
        section_number,
        level,
        section_content,
        ordinal,
        page_numbers,
        backend
    from source
)

select * from renamed
