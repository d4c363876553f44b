with chunks as (
    select * from {{ ref('stg_chunks') }}
),

final as (
    select
        chunk_id,
        text_content,
        ordinal,
        paper_id as ref_paper_id,
        page_id as ref_page_id,
        page_number,
        token_count,
        section_title,
        backend
    from chunks
)

select * from final
