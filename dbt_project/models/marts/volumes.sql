with papers as (
    select * from {{ ref('stg_metadata') }}
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
        coalesce(e.num_failed, 0) as num_failed
    from paper_counts as p
    full outer join error_counts as e on p.volume = e.volume
)

select * from final
