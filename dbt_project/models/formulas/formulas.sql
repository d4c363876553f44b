with source as (
    select * from {{ source('formula_lake', 'formulas') }}
),

final as (
    select * from source
)

select * from final
