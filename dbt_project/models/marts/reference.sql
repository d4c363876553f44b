{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
        pre_hook="{{ paper_delta_delete('ref_paper_id') }}",
        meta={'paper_column': 'ref_paper_id'},
    )
}}

with refs as (
    select * from {{ ref('stg_references') }}{{ paper_delta_filter('paper_id') }}
),

final as (
    select
        reference_id,
        reference_content,
        citing_context,
        coalesce(cited_count, 0) as cited_count,
        ordinal,
        paper_id as ref_paper_id,
        page_id as ref_page_id,
        page_number,
        backend
    from refs
)

select * from final
