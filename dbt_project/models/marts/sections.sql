with sections as (
    select * from {{ ref('stg_sections') }}
),

final as (
    select
        section_id,
        section_title,
        section_content,
        cast(null as varchar) as section_summary,
        ordinal,
        page_numbers,
        paper_id as ref_paper_id,
        section_number,
        level,
        backend
    from sections
)

select * from final
