"""The evaluation files under ``PAPERLAKE_HOME/evaluation/``, and what is stale among them.

::

    evaluation/probes/<volume>/<paper>.jsonl       a paper's probes (AirQA rows with their evidence)
    evaluation/probes/<volume>/<paper>.json        what they were generated from (digest), counts per kind
    evaluation/volume_set/<volume>.jsonl           the volume's probes, paper by paper (what the check scores)
    evaluation/quality/<volume>.json               the latest retrieval-quality report of the volume
    evaluation/quality/<volume>.history.jsonl      every report, oldest first

Every file is replaced atomically, so a run killed at any line leaves the previous file or the new one. A paper's
probes are stale when its digest changes: the generator's code (``probes.py`` and :data:`PROBES_VERSION`), the
paper's PDF and parser version, or the dbt project. A volume's quality report is stale when the probes its set is made
of (its papers' probe files, whatever made them change: a set built from older ones is stale too), the vector
stage's fingerprint, the records of what each collection holds for the volume's papers, the methods or the threshold
change: a parser or encoder change re-runs the check, an unchanged ingest does not.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from paperlake.config import Settings
from paperlake.evaluation import probes as probes_module
from paperlake.evaluation.probes import PROBES_VERSION, paper_probes
from paperlake.lake.store import atomic_write_bytes
from paperlake.runtime.healing import set_aside
from paperlake.vectors.ledger import read_ledger, stage_fingerprint
from paperlake.warehouse.build import dbt_digest
from paperlake.warehouse.read import connect_read_only, file_identity

_GENERATOR_DIGEST = hashlib.sha256(Path(probes_module.__file__).read_bytes()).hexdigest()[:16]


def probes_path(settings: Settings, paper_key: str) -> Path:
    return settings.evaluation / "probes" / f"{paper_key}.jsonl"


def volume_set_path(settings: Settings, volume: str) -> Path:
    return settings.evaluation / "volume_set" / f"{volume}.jsonl"


def quality_path(settings: Settings, volume: str) -> Path:
    return settings.evaluation / "quality" / f"{volume}.json"


def _write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, lambda handle: handle.write(text.encode("utf-8")))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _jsonl(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)


def read_jsonl(path: Path, *, skip_damaged: bool = False) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file ([] when there is none). A line that is not a JSON object makes the file
    damaged (``ValueError``: these files are derived, and the caller makes them again) unless ``skip_damaged``
    (a history, where one bad line costs that line)."""
    if not path.exists():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            row = None
        if isinstance(row, dict):
            rows.append(row)
        elif not skip_damaged:
            raise ValueError(f"{path}, line {number}: not a JSON object")
    return rows


def damaged_jsonl(path: Path) -> str | None:
    """Why a derived JSON Lines file cannot be read, or None (None too when it is missing)."""
    try:
        read_jsonl(path)
    except (OSError, ValueError) as error:
        return str(error)
    return None


# ---------------------------------------------------------------------------------------------------------------
# Per paper


# warehouse path → (its file identity, its metadata rows): an ingest's checks ask for the papers several times
_PAPER_ROWS: dict[Path, tuple[tuple, list[tuple]]] = {}
PAPER_ROWS_SQL = "select paper_key, paper_id::varchar, volume, sha256, parser_version from metadata order by paper_key"


def warehouse_papers(settings: Settings, con: Any = None) -> dict[str, dict[str, str]]:
    """paper_key → paper_id, volume and the probe digest, for every paper of the warehouse (read through ``con``
    when given: DuckDB refuses a second connection to one file with another configuration in the same process).

    Without ``con``, the rows are read again only when the file's identity changed since the last read (taken
    before reading: a build swapped in meanwhile reads as changed next time)."""
    if con is None:
        identity = file_identity(settings.warehouse)
        if identity is None:
            return {}
        cached = _PAPER_ROWS.get(settings.warehouse)
        if cached is None or cached[0] != identity:
            with connect_read_only(settings.warehouse) as opened:
                cached = (identity, opened.execute(PAPER_ROWS_SQL).fetchall())
            _PAPER_ROWS.clear()  # the last warehouse read only (a process may open many homes: the tests)
            _PAPER_ROWS[settings.warehouse] = cached
        return _papers(cached[1])
    return _papers(con.execute(PAPER_ROWS_SQL).fetchall())


def _papers(rows: list[tuple]) -> dict[str, dict[str, str]]:
    dbt = dbt_digest("warehouse")
    return {
        key: {
            "paper_id": pid,
            "volume": volume or key.partition("/")[0],
            "digest": hashlib.sha256(f"{PROBES_VERSION}|{_GENERATOR_DIGEST}|{sha}|{parser}|{dbt}".encode()).hexdigest()[
                :16
            ],
        }
        for key, pid, volume, sha, parser in rows
    }


def stale_probe_papers(settings: Settings) -> dict[str, str]:
    """paper_key → why its probes must be (re)generated."""
    stale = {}
    for key, paper in warehouse_papers(settings).items():
        path = probes_path(settings, key)
        sidecar = path.with_suffix(".json")
        recorded = _read_json(sidecar)
        if not recorded and os.path.lexists(sidecar):
            stale[key] = f"the probe record {sidecar.name} cannot be read"
        elif path.is_dir():
            stale[key] = f"the probe file {path.name} is a folder"
        elif not recorded and not os.path.lexists(path):
            stale[key] = "no probes yet"
        elif not recorded:
            stale[key] = f"the probe record {sidecar.name} is missing"
        elif not path.is_file():
            stale[key] = f"the probe file {path.name} is missing"
        elif damage := damaged_jsonl(path):
            stale[key] = f"the probe file {path.name} is damaged ({damage})"
        elif (held := len(read_jsonl(path))) != recorded.get("count"):
            stale[key] = f"the probe file {path.name} holds {held} probes, its record {recorded.get('count')}"
        elif recorded.get("digest") != paper["digest"]:
            stale[key] = "the paper, its parser, the warehouse models or the probe generator changed"
    return stale


def orphan_probe_files(settings: Settings) -> list[str]:
    """Paper keys with probe files whose paper left the warehouse."""
    root = settings.evaluation / "probes"
    if not root.exists():
        return []
    present = set(warehouse_papers(settings))
    keys = {p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.json*") if not p.name.startswith(".")}
    return sorted(keys - present)


def remove_probes(settings: Settings, paper_key: str) -> None:
    for suffix in (".jsonl", ".json"):
        probes_path(settings, paper_key).with_suffix(suffix).unlink(missing_ok=True)


def write_probes(settings: Settings, paper_key: str, con: Any = None) -> dict[str, Any]:
    """Generate and write one paper's probes (the sidecar last, so a kill in between leaves the paper stale); a
    paper no longer in the warehouse loses its files. ``con``: a read-only warehouse connection to use (the asset's
    DuckDBResource), else one is opened. Returns the sidecar record."""
    if con is None:
        if not settings.warehouse.exists():
            remove_probes(settings, paper_key)
            return {"paper_key": paper_key, "count": 0, "removed": True}
        with connect_read_only(settings.warehouse) as opened:
            return write_probes(settings, paper_key, opened)
    paper = warehouse_papers(settings, con).get(paper_key)
    if paper is None:
        remove_probes(settings, paper_key)
        return {"paper_key": paper_key, "count": 0, "removed": True}
    rows = paper_probes(con, paper["paper_id"])
    record = {
        "paper_key": paper_key,
        "paper_id": paper["paper_id"],
        "volume": paper["volume"],
        "digest": paper["digest"],
        "probes_version": PROBES_VERSION,
        "count": len(rows),
        "by_kind": dict(sorted(Counter(r["probe_kind"] for r in rows).items())),
    }
    target = probes_path(settings, paper_key)
    _write_text(target, _jsonl(rows))
    _write_text(target.with_suffix(".json"), json.dumps(record, indent=2, sort_keys=True))
    return record


# ---------------------------------------------------------------------------------------------------------------
# Per volume


def volumes(settings: Settings) -> dict[str, list[str]]:
    """volume → its paper keys in the warehouse."""
    grouped: dict[str, list[str]] = {}
    for key, paper in warehouse_papers(settings).items():
        grouped.setdefault(paper["volume"], []).append(key)
    return grouped


def write_volume_set(settings: Settings, volume: str) -> dict[str, Any]:
    """The volume's probe set: its papers' probe files, paper by paper (a paper without probes is generated first)."""
    keys = volumes(settings).get(volume, [])
    stale = stale_probe_papers(settings)
    rows: list[dict[str, Any]] = []
    for key in keys:
        if key in stale:
            write_probes(settings, key)
        rows += read_jsonl(probes_path(settings, key))
    path = volume_set_path(settings, volume)
    if not keys:
        path.unlink(missing_ok=True)
        return {"volume": volume, "count": 0, "papers": 0, "removed": True}
    _write_text(path, _jsonl(rows))
    kinds = Counter(r["probe_kind"] for r in rows)
    per_paper = Counter(r["paper_key"] for r in rows)
    return {
        "volume": volume,
        "count": len(rows),
        "papers": len(keys),
        "by_kind": dict(sorted(kinds.items())),
        "min_per_paper": min((per_paper.get(k, 0) for k in keys), default=0),
        "path": str(path),
        "digest": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
    }


def quality_fingerprint(settings: Settings, volume: str) -> str:
    """What the volume's retrieval-quality report depends on (see the module docstring)."""

    keys = set(volumes(settings).get(volume, []))
    root = settings.home / "vectors"
    synced = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []:
        ledger = read_ledger(settings.home, folder.name)
        synced[folder.name] = {k: ledger[k] for k in sorted(keys & set(ledger))}
    parts = {
        "set": _probes_digest(settings, sorted(keys)),
        "vectors": stage_fingerprint(),
        "synced": synced,
        "methods": settings.eval_methods,
        "threshold": settings.eval_min_answer_at_5,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _probes_digest(settings: Settings, keys: list[str]) -> str:
    """The content of the probe files a volume's set is made of (:func:`write_volume_set`): a paper's probes
    regenerated with other rows change it even where nothing else did (a generator change, lost probe files), so the
    set is rebuilt and scored again; the set file itself is what the check scored, not what it should score."""
    digest = hashlib.sha256()
    for key in keys:
        path = probes_path(settings, key)
        content = path.read_bytes() if path.exists() else None
        digest.update(f"{key}\0{-1 if content is None else len(content)}\0".encode() + (content or b""))
    return digest.hexdigest()


def stale_volumes(settings: Settings) -> dict[str, str]:
    """volume → why its probe set or quality report must be rebuilt."""
    stale_papers = stale_probe_papers(settings)
    result = {}
    for volume, keys in sorted(volumes(settings).items()):
        report = _read_json(quality_path(settings, volume))
        path = volume_set_path(settings, volume)
        if any(key in stale_papers for key in keys):
            result[volume] = "probes of changed papers"
        elif not path.is_file():
            result[volume] = f"the probe set {path.name} is missing" if report else "no probe set yet"
        elif damage := damaged_jsonl(path):
            result[volume] = f"the probe set {path.name} is damaged ({damage})"
        elif not {r.get("paper_key") for r in read_jsonl(path)} <= set(keys):
            result[volume] = "papers left the volume"
        elif report and (held := len(read_jsonl(path))) != report.get("probes"):
            result[volume] = f"the probe set {path.name} holds {held} probes, its last report {report.get('probes')}"
        elif not report:
            result[volume] = "never evaluated"
        elif report.get("fingerprint") != quality_fingerprint(settings, volume):
            result[volume] = "the probe set, the vector stage or a collection's contents changed"
    return result


def record_quality(settings: Settings, volume: str, report: dict[str, Any]) -> None:
    """The latest report (replaced atomically) and one more line of its history."""
    path = quality_path(settings, volume)
    _write_text(path, json.dumps(report, indent=2, sort_keys=True))
    history_path = path.with_suffix(".history.jsonl")
    _heal_history(history_path)
    with open(history_path, "a", encoding="utf-8") as history:
        history.write(json.dumps(report, sort_keys=True) + "\n")


def heal_quality_histories(settings: Settings) -> None:
    """Every volume's quality history checked (an ingest checks them, evaluated or not): see :func:`_heal_history`."""
    root = settings.evaluation / "quality"
    for history_path in sorted(root.glob("*.history.jsonl")) if root.is_dir() else []:
        _heal_history(history_path)


def _heal_history(history_path: Path) -> None:
    """A history is appended to, never rebuilt. One with lines no evaluation wrote (bytes that are not text, a line
    cut by a kill, garbage) is set aside whole, and its reports that still read are written back, so the next report
    starts on a line of its own (appended after a cut line, it would be lost with it)."""
    if history_path.is_dir():
        set_aside(history_path, "a directory, not a file")
        return
    damage = _not_text(history_path) or damaged_jsonl(history_path)
    if not damage and history_path.exists() and history_path.stat().st_size:
        with open(history_path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            damage = None if handle.read(1) == b"\n" else "its last line was cut short"
    if damage:
        kept = read_jsonl(history_path, skip_damaged=True)
        set_aside(history_path, f"{damage}; {len(kept)} report(s) that read kept")
        _write_text(history_path, _jsonl(kept))


def _not_text(path: Path) -> str | None:
    """Why ``path`` is not UTF-8 text, or None (None too when it is missing)."""
    try:
        path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        return f"{type(error).__name__}: {error}"
    return None


def read_quality(settings: Settings) -> dict[str, dict[str, Any]]:
    root = settings.evaluation / "quality"
    if not root.exists():
        return {}
    return {p.stem: report for p in sorted(root.glob("*.json")) if (report := _read_json(p))}
