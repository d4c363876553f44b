{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
        pre_hook="{{ paper_delta_delete('ref_paper_id') }}",
        meta={'paper_column': 'ref_paper_id'},
    )
}}

with sections as (
    select * from {{ ref('stg_sections') }}{{ paper_delta_filter('paper_id') }}
),

final as (
    select
        section_id,
        section_title,
        section_content,
        e.summary as section_summary,
        ordinal,
        page_numbers,
        paper_id as ref_paper_id,
        section_number,
        level,
        backend
    from sections
    {{ enrichment_join('section_summary', 'e', 'sections.section_id') }}
)

select * from final
