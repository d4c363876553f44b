"""Typed resources, configured from the environment (no module-level clients, no secrets in code)."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from paperlake.config import Settings
from paperlake.lake import Lake


class PaperlakeResource(dg.ConfigurableResource):
    """Where the inbox and the stores are, and how to parse."""

    home: str = "data"
    inboxes: list[str] = []
    mineru_dir: str | None = None
    backend: str = "auto"
    max_chunk_tokens: int = 512

    def settings(self) -> Settings:
        return Settings.from_env(
            home=Path(self.home).expanduser().resolve(),
            backend=self.backend,
            mineru_dir=Path(self.mineru_dir).resolve() if self.mineru_dir else None,
            max_chunk_tokens=self.max_chunk_tokens,
            milvus_uri=os.environ.get("MILVUS_URI") or str(Path(self.home).expanduser().resolve() / "milvus.db"),
        )

    def inbox_paths(self) -> list[Path]:
        return [Path(p).expanduser().resolve() for p in self.inboxes]

    def lake(self) -> Lake:
        return Lake(self.settings().lake)


def paperlake_from_env() -> PaperlakeResource:
    """The resource as `dagster dev` and the schedule see it: PAPERLAKE_HOME, PAPERLAKE_INBOX (os.pathsep list)."""
    inboxes = [p for p in os.environ.get("PAPERLAKE_INBOX", "").split(os.pathsep) if p]
    return PaperlakeResource(
        home=os.environ.get("PAPERLAKE_HOME", "data"),
        inboxes=inboxes,
        mineru_dir=os.environ.get("PAPERLAKE_MINERU_DIR") or None,
        backend=os.environ.get("PAPERLAKE_BACKEND", "auto"),
        max_chunk_tokens=int(os.environ.get("PAPERLAKE_MAX_CHUNK_TOKENS", "512")),
    )
