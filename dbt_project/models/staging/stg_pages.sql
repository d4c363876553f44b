with source as (
    select * from {{ source('lake', 'pages') }}
),

renamed as (
    select
        page_id::uuid as page_id,
        paper_id::uuid as paper_id,
        page_number,
        page_width,
        page_height,
        page_content,
        backend
    from source
)

select * from renamed
