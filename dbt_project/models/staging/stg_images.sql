with source as (
    select * from {{ source('lake', 'images') }}
),

renamed as (
    select
        image_id::uuid as image_id,
        paper_id::uuid as paper_id,
        page_id::uuid as page_id,
        page_number,
        ordinal,
        image_label,
        image_caption,
        image_text,
        bbox,
        image_kind,
        parent_image_id::uuid as parent_image_id,
        detector,
        backend
    from source
)

select * from renamed
