{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
        pre_hook="{{ paper_delta_delete('paper_id') }}",
        meta={'paper_column': 'paper_id'},
    )
}}

with papers as (
    select * from {{ ref('stg_metadata') }}{{ paper_delta_filter('paper_id') }}
),

final as (
    select
        paper_id,
        title,
        abstract,
        num_pages,
        conference_full,
        conference_abbreviation,
        pub_year,
        volume,
        download_url,
        bibtex,
        authors,
        affiliations,
        author_affiliations,
        emails,
        email_domains,
        front_matter,
        pdf_path,
        t.summary as tldr,
        g.tags,
        venue,
        paper_key,
        file_name,
        license,
        sha256,
        title_source,
        backend,
        parser_version
    from papers
    {{ enrichment_join('tldr', 't', 'papers.paper_id') }}
    {{ enrichment_join('tags', 'g', 'papers.paper_id') }}
)

select * from final
