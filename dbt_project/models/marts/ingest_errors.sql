with errors as (
    select * from {{ ref('stg_ingest_errors') }}
),

final as (
    select
        paper_key,
        paper_id,
        volume,
        file_name,
        stage,
        reason,
        sha256,
        parser_version,
        occurred_at
    from errors
)

select * from final
