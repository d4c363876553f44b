with source as (
    select * from {{ source('lake', 'references') }}
),

renamed as (
    select
        reference_id::uuid as reference_id,
        paper_id::uuid as paper_id,
        page_id::uuid as page_id,
        page_number,
        ordinal,
        reference_content,
        citing_context,
        cited_count,
        backend
    from source
)

select * from renamed
