with source as (
    select * from {{ source('formula_lake', 'formula_relations') }}
),

final as (
    select * from source
)

select * from final
