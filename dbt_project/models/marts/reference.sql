with refs as (
    select * from {{ ref('stg_references') }}
),

final as (
    select
        reference_id,
        reference_content,
        ordinal,
        paper_id as ref_paper_id,
        page_id as ref_page_id,
        page_number,
        backend
    from refs
)

select * from final
