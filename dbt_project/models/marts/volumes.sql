with papers as (  -- the mart, not its staging model: an incremental build narrows the lake's per-paper sources
    select * from {{ ref('metadata') }}
),

errors as (
    select * from {{ ref('stg_ingest_errors') }}
),

paper_counts as (
    select
        volume,
        any_value(venue) as venue,
        any_value(conference_abbreviation) as conference_abbreviation,
        any_value(pub_year) as pub_year,
        count(*)::integer as num_papers,
        sum(num_pages)::integer as num_pages
    from papers
    group by volume
),

llm_usage as (
    select
        p.volume,
        count(*)::integer as llm_calls,
        sum(e.prompt_tokens + e.completion_tokens)::bigint as llm_tokens,
        sum(e.cost_usd)::double as llm_cost_usd,
        count(*) filter (where e.status = 'error')::integer as llm_errors
    from {{ ref('stg_enrichment') }} as e
    join papers as p on p.paper_id = e.paper_id
    group by p.volume
),

error_counts as (
    select volume, count(*)::integer as num_failed
    from errors
    group by volume
),

final as (
    select
        coalesce(p.volume, e.volume) as volume,
        p.venue,
        p.conference_abbreviation,
        p.pub_year,
        coalesce(p.num_papers, 0) as num_papers,
        coalesce(p.num_pages, 0) as num_pages,
        coalesce(e.num_failed, 0) as num_failed,
        coalesce(u.llm_calls, 0) as llm_calls,
        coalesce(u.llm_tokens, 0) as llm_tokens,
        coalesce(u.llm_cost_usd, 0) as llm_cost_usd,
        coalesce(u.llm_errors, 0) as llm_errors
    from paper_counts as p
    full outer join error_counts as e on p.volume = e.volume
    left join llm_usage as u on u.volume = coalesce(p.volume, e.volume)
)

select * from final
