with source as (
    select * from {{ source('lake', 'metadata') }}
),

renamed as (
    select
        paper_id::uuid as paper_id,
        paper_key,
        title,
        abstract,
        num_pages,
        conference_full,
        conference_abbreviation,
        pub_year,
        volume,
        venue,
        download_url,
        bibtex,
        authors,
        affiliations,
        author_affiliations,
        emails,
        email_domains,
        front_matter,
        pdf_path,
        file_name,
        license,
        sha256,
        title_source,
        backend,
        parser_version
    from source
)

select * from renamed
