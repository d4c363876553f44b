{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
        pre_hook="{{ paper_delta_delete('ref_paper_id') }}",
        meta={'paper_column': 'ref_paper_id'},
    )
}}

with images as (
    select * from {{ ref('stg_images') }}{{ paper_delta_filter('paper_id') }}
),

final as (
    select
        image_id,
        image_caption,
        image_text,
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
