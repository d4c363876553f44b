{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
        pre_hook="{{ paper_delta_delete('ref_paper_id') }}",
        meta={'paper_column': 'ref_paper_id'},
    )
}}

with pages as (
    select * from {{ ref('stg_pages') }}{{ paper_delta_filter('paper_id') }}
),

final as (
    select
        page_id,
        page_number,
        round(page_width)::integer as page_width,
        round(page_height)::integer as page_height,
        page_content,
        e.summary as page_summary,
        paper_id as ref_paper_id,
        backend
    from pages
    {{ enrichment_join('page_summary', 'e', 'pages.page_id') }}
)

select * from final
