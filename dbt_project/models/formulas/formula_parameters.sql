with source as (
    select * from {{ source('formula_lake', 'formula_parameters') }}
),

final as (
    select * from source
)

select * from final
