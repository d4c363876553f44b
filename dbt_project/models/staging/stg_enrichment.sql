with source as (
    select * from {{ source('lake', 'enrichment') }}
),

typed as (
    select
        paper_id::uuid as paper_id,
        kind,
        item_id::uuid as item_id,
        status,
        summary,
        tags,
        reason,
        model,
        prompt_version,
        content_hash,
        prompt_tokens,
        completion_tokens,
        cost_usd,
        cached,
        created_at
    from source
)

select * from typed
