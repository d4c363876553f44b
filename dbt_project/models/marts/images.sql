with images as (
    select * from {{ ref('stg_images') }}
),

final as (
    select
        image_id,
        image_caption,
        e.summary as image_summary,
        {{ int_bbox('bbox') }} as bounding_box,
        ordinal,
        paper_id as ref_paper_id,
        page_id as ref_page_id,
        page_number,
        image_label,
        image_kind,
        parent_image_id,
        detector,
        backend
    from images
    {{ enrichment_join('image_summary', 'e', 'coalesce(images.parent_image_id, images.image_id)') }}
)

select * from final
