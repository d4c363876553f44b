{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
        pre_hook="{{ paper_delta_delete('ref_paper_id') }}",
        meta={'paper_column': 'ref_paper_id'},
    )
}}

with equations as (
    select * from {{ ref('stg_equations') }}{{ paper_delta_filter('paper_id') }}
),

final as (
    select
        equation_id,
        coalesce(nullif(trim(equation_latex), ''), equation_text) as equation_content,
        ordinal,
        paper_id as ref_paper_id,
        page_id as ref_page_id,
        page_number,
        equation_number,
        equation_text,
        latex_source,
        {{ int_bbox('bbox') }} as bounding_box,
        context,
        context_after,
        -- what a question about the equation or its symbols names: its number, the sentences around it, the formula
        concat_ws(
            chr(10),
            'Equation ' || equation_number,
            context,
            coalesce(nullif(trim(equation_latex), ''), equation_text),
            context_after
        ) as equation_passage,
        detector,
        backend
    from equations
)

select * from final
