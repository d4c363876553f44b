"""The DuckDB warehouse: built by dbt into a side file and swapped in, read without locks."""
