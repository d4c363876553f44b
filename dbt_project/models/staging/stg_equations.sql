with source as (
    select * from {{ source('lake', 'equations') }}
),

renamed as (
    select
        equation_id::uuid as equation_id,
        paper_id::uuid as paper_id,
        page_id::uuid as page_id,
        page_number,
        ordinal,
        equation_text,
        equation_latex,
        equation_number,
        latex_source,
        bbox,
        context,
        context_after,
        detector,
        backend
    from source
)

select * from renamed
