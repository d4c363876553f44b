"""paperlake: the pure library behind the pipeline and the agent (no Dagster imports here)."""

__version__ = "0.1.0"
