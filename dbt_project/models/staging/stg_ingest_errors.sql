with source as (
    select * from {{ source('lake', 'ingest_errors') }}
),

renamed as (
    select
        paper_key,
        paper_id::uuid as paper_id,
        volume,
        file_name,
        pdf_path,
        sha256,
        stage,
        reason,
        parser_version,
        manifest_hash,
        occurred_at
    from source
)

select * from renamed
