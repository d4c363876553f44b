"""Stores that heal themselves (issue 47): every kind of file of a built home, and of its inbox, damaged in each way
(truncated to half or to nothing, random bytes, deleted, replaced by a folder), then one `paperlake ingest`; the
stores must equal the clean reference, with a line saying what was rebuilt, and no command may print a traceback.
The harness, the catalogue of file kinds and what each case checks are in ``support/damage_harness.py``.

``-m damage`` (in the default run: the reference, then one ingest or two per test) is the catalogue's check, a
damaged warehouse, lake view and Milvus segment, and a linked inbox; ``-m damage_matrix`` is every other kind ×
damage, the other inbox cases (links out of the inbox, identical copies, a linked inbox from nothing) and a
read-only home: about two hours on two cores.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.crash_harness import (
    FIRST,
    assert_same_stores,
    build_references,
    fresh_home,
    run_ingest,
    snapshot,
)
from support.damage_harness import (
    FIRST_KEY,
    KIND_NAMES,
    KINDS,
    STUB_SCRIPT,
    build_reference,
    differences,
    failure_lines,
    linked_inbox,
    read_only_wrapper,
    read_problems,
    run_case,
    set_read_only,
    traceback_line,
    warehouse_facts,
)
from support.fixtures import make_inbox
from support.openai_stub import start_stub

pytestmark = pytest.mark.usefixtures("corpus")

REPRESENTATIVE = {  # the default run's share of the matrix: the three stores, one damage each
    ("warehouse", "random_bytes"),
    ("lake_view", "truncated_half"),
    ("milvus_segment", "truncated_half"),
}
CASES = [
    pytest.param(
        kind.name,
        how,
        id=f"{kind.name}-{how}",
        marks=pytest.mark.damage if (kind.name, how) in REPRESENTATIVE else pytest.mark.damage_matrix,
    )
    for kind in KINDS
    for how in kind.damages
]


def own(home: Path) -> dict[str, str]:
    """The home for the CLI's own files too (its error log goes to PAPERLAKE_HOME, not to --home), wide lines."""
    return {"PAPERLAKE_HOME": str(home), "COLUMNS": "250"}


@pytest.fixture(scope="module")
def crash_references(tmp_path_factory: pytest.TempPathFactory, dbt_manifest) -> dict:
    return build_references(tmp_path_factory)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, crash_references):
    with start_stub(STUB_SCRIPT, tmp_path_factory.mktemp("damage-stub"), idle=24 * 3600) as stub:
        yield build_reference(tmp_path_factory.mktemp("damage"), crash_references, stub.base_url)


@pytest.mark.damage
def test_the_catalogue_names_every_file_of_a_built_home(reference):
    """Every file of the reference home and inbox belongs to a kind, and every kind has a file there: a new kind of
    file in a home (a new store, a side file) fails here until the catalogue knows it, and so is damaged too."""
    assert not reference.unclaimed, f"files no kind claims: {reference.unclaimed}"
    assert not [kind.name for kind in KINDS if kind.name not in reference.files and not kind.optional]


@pytest.mark.parametrize(("kind", "how"), CASES)
def test_a_damaged_file_heals_in_one_ingest(reference, kind, how):
    problems = run_case(reference, KIND_NAMES[kind], how)
    assert not problems, "\n".join(problems)


@pytest.mark.damage
def test_a_linked_inbox_is_the_copied_inbox(tmp_path, crash_references):
    """A home built from copied PDFs, then pointed at the same papers through links (PDFs linked to the corpus, a
    volume that is a link to a folder of another name): nothing to parse, the same stores. A link's key is its own
    name, not its target's."""
    from paperlake.lake.inbox import scan_inbox

    home = fresh_home(tmp_path, crash_references["home_both"])
    code, output = run_ingest(home, linked_inbox(tmp_path / "linked"), environment=own(home))
    assert code == 0 and traceback_line(output) is None, output[-3000:]
    assert "plan: 0 to parse, 2 unchanged, 0 removed" in " ".join(output.split()), output[-3000:]
    assert_same_stores(home, crash_references["both"])

    aliased = tmp_path / "aliased" / "inbox" / "vol"
    aliased.mkdir(parents=True)
    (aliased / "alias.pdf").symlink_to(next((tmp_path / "linked" / "inbox").rglob(f"{FIRST}.pdf")))
    assert [source.paper_key for source in scan_inbox([aliased.parent])] == ["vol/alias"]


@pytest.mark.damage_matrix
def test_a_linked_inbox_ingests_from_nothing_like_a_copied_one(tmp_path, crash_references):
    home = tmp_path / "home"
    code, output = run_ingest(home, linked_inbox(tmp_path / "linked"), environment=own(home))
    assert code == 0 and traceback_line(output) is None, output[-3000:]
    assert_same_stores(home, crash_references["both"])


@pytest.mark.damage_matrix
def test_links_out_of_the_inbox_loops_and_dangling_links_are_error_rows(tmp_path, crash_references):
    """Each link that cannot be read as a paper is an ingest_errors row and a failure line, never a silent drop;
    the real paper beside them stays; the next ingest has nothing to do."""
    home = fresh_home(tmp_path, crash_references["home_one"])
    inbox = make_inbox(tmp_path, [FIRST])
    volume = inbox / FIRST.split("-")[0]
    outside = Path("/etc/hostname") if Path("/etc/hostname").is_file() else Path("/etc/passwd")
    links = {
        "outside": outside,
        "loop": volume / "loop.pdf",
        "ring-a": volume / "ring-b.pdf",
        "ring-b": volume / "ring-a.pdf",
        "dangling": volume / "nothing-here.pdf",
    }
    for name, target in links.items():
        (volume / f"{name}.pdf").symlink_to(target)
    code, output = run_ingest(home, inbox, environment=own(home))
    problems = [f"the ingest crashes: {line}"] if (line := traceback_line(output)) else []
    keys, errors = warehouse_facts(home)
    problems += [
        f"{volume.name}/{name} has no ingest_errors row" for name in links if f"{volume.name}/{name}" not in errors
    ]
    named = " ".join(failure_lines(output))
    problems += [
        f"no failure line names {volume.name}/{name}" for name in links if f"{volume.name}/{name}:" not in named
    ]
    if FIRST_KEY not in keys:
        problems.append(f"{FIRST_KEY} is gone")
    code, again = run_ingest(home, inbox, environment=own(home))
    if code != 0 or traceback_line(again) or "plan: 0 to parse" not in again:
        problems.append(f"the next ingest does not settle (exit {code}): {(failure_lines(again) or [''])[0][:300]}")
    assert not problems, "\n".join(problems) + f"\n{output[-3000:]}"


@pytest.mark.damage_matrix
def test_three_identical_copies_of_a_pdf_settle(tmp_path, crash_references):
    """The manifest-listed PDF and two unlisted copies of it (same bytes, same time): the listed one is kept, each
    copy is an ingest_errors row, and the next ingest is a no-op that exits 0 and changes nothing."""
    home = fresh_home(tmp_path, crash_references["home_one"])
    inbox = make_inbox(tmp_path, [FIRST])
    original = inbox / FIRST.split("-")[0] / f"{FIRST}.pdf"
    copies = [original.with_name(f"{name}.pdf") for name in ("copy-a", "copy-z")]
    for copy in copies:
        shutil.copy2(original, copy)
    code, output = run_ingest(home, inbox, environment=own(home))
    problems = [f"the first ingest crashes: {line}"] if (line := traceback_line(output)) else []
    settled = snapshot(home)
    code, again = run_ingest(home, inbox, environment=own(home))
    if code != 0 or traceback_line(again) or "plan: 0 to parse" not in again:
        plan = next((x for x in again.splitlines() if x.startswith("plan:")), "(no plan line)")
        problems.append(f"the second ingest is not a no-op (exit {code}; {plan}): {failure_lines(again)[:2]}")
    problems += [f"the second ingest changed {line}" for line in differences(snapshot(home), settled)]
    keys, errors = warehouse_facts(home)
    if keys != {FIRST_KEY}:
        problems.append(f"metadata holds {sorted(keys)}, not the listed copy alone")
    for copy in copies:
        key = f"{copy.parent.name}/{copy.stem}"
        if key not in errors:
            problems.append(f"{key} has no ingest_errors row")
    assert not problems, "\n".join(problems)


@pytest.mark.damage_matrix
def test_a_read_only_home_fails_in_one_line_and_heals_once_writable(tmp_path, crash_references):
    """chmod -R a-w on a home: an ingest that must write (a paper removed) exits non-zero with a one-line error and
    no traceback; the read commands still read; with write permission back, the next ingest converges."""
    wrapper = read_only_wrapper(tmp_path / "probe")
    if wrapper is None:
        pytest.skip("runs as root, and setpriv cannot drop the capabilities that let root write a read-only folder")
    home = fresh_home(tmp_path, crash_references["home_both"])
    inbox = make_inbox(tmp_path, [FIRST])
    set_read_only(home, True)
    try:
        code, output = run_ingest(home, inbox, wrapper=wrapper, environment=own(home))
        problems = read_problems(home, own(home), must_succeed=True, wrapper=wrapper)
    finally:
        set_read_only(home, False)
    if line := traceback_line(output):
        problems.append(f"the ingest crashes (exit {code}): {line}")
    elif code == 0 or not failure_lines(output):
        problems.append(f"the ingest exits {code} without a one-line error: {output.strip().splitlines()[-1:]}")
    elif not any(str(home) in line for line in failure_lines(output)):
        problems.append(f"the ingest's error does not name the read-only path: {failure_lines(output)[0][:300]}")
    code, again = run_ingest(home, inbox, environment=own(home))
    if code != 0 or traceback_line(again):
        problems.append(f"once writable, the ingest exits {code}: {(failure_lines(again) or [''])[0][:300]}")
    else:
        problems += [
            f"once writable, stores differ: {line}" for line in differences(snapshot(home), crash_references["one"])
        ]
    assert not problems, "\n".join(problems) + f"\n{output[-3000:]}"
