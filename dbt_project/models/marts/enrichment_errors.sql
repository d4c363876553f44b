with enrichment as (
    select * from {{ ref('stg_enrichment') }}
),

final as (
    select
        paper_id,
        kind,
        item_id,
        reason,
        model,
        prompt_version,
        created_at
    from enrichment
    where status = 'error'
)

select * from final
