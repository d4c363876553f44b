with source as (
    select * from {{ source('formula_lake', 'constants') }}
),

final as (
    select * from source
)

select * from final
