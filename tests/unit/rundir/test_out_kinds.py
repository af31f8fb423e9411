"""``--out`` only where that kind of directory belongs: a run, a comparison, a tune or a judge card refuses a
directory that is not empty and not its own kind, in one line naming what is there, before anything is made
in it; nothing lands in a docs tree; ``report`` writes only into a run directory, and says so in one line when
the run directory takes no writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from redraft.cli import main
from redraft.errors import UserError
from redraft.judging import held_card
from redraft.rundir import COMPARISON, JUDGE_CARD, RUN, TUNE, RunStore, check_kind
from redraft.rundir.lock import LOCK
from tests.support.disks import remount, small_disk
from tests.support.paths import REPO_ROOT
from tests.support.report_runs import make_run, redraft
from tests.unit.rundir.test_damaged_rundir import manifest

MODEL = ["--model", "scripted:tests.support.replies:always_seven", "--limit", "2"]


def photos(root: Path) -> Path:
    root.mkdir()
    for name in ("beach.jpg", "cat.jpg", "dog.jpg", "hills.jpg", "snow.jpg"):
        (root / name).write_bytes(b"\xff\xd8")
    return root


def in_process(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as ended:
        return int(ended.code or 0)
    return 0


@pytest.mark.parametrize(
    "command",
    [
        ["run", "arithmetic", *MODEL],
        ["compare", "arithmetic", "--arms", "self_refine", *MODEL],
        ["tune", "arithmetic", *MODEL],
    ],
    ids=["run", "compare", "tune"],
)
def test_a_folder_of_photos_is_refused_naming_what_is_there(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = photos(tmp_path / "photos")
    assert in_process(*command, "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {out} is not empty" in err
    assert "it holds beach.jpg, cat.jpg, dog.jpg, hills.jpg and 1 more" in err
    assert sorted(p.name for p in out.iterdir()) == ["beach.jpg", "cat.jpg", "dog.jpg", "hills.jpg", "snow.jpg"]


def test_a_run_refuses_a_comparison_s_directory_and_a_comparison_a_run_s(tmp_path: Path) -> None:
    comparison = tmp_path / "comparison"
    (comparison / "arms" / "self_refine").mkdir(parents=True)
    with pytest.raises(UserError, match=r"is a comparison's directory \(it holds arms\), not a run's"):
        RunStore.open(comparison, manifest())
    assert not (comparison / LOCK).exists() and not (comparison / "manifest.json").exists()
    run = make_run(tmp_path / "run")
    with pytest.raises(UserError, match=r"is a run's directory \(it holds manifest\.json\), not a comparison's"):
        check_kind(run, COMPARISON)
    with pytest.raises(UserError, match="is a run's directory"):
        check_kind(run, TUNE)
    with pytest.raises(UserError, match="is a run's directory"):
        held_card(run)


def test_a_new_an_empty_or_an_own_kind_s_directory_is_taken(tmp_path: Path) -> None:
    check_kind(tmp_path / "new", RUN)
    (tmp_path / "left").mkdir()
    (tmp_path / "left" / "ray.log").write_text("Ray started\n")  # what a run interrupted before its manifest left
    (tmp_path / "left" / ".DS_Store").write_bytes(b"")
    check_kind(tmp_path / "left", COMPARISON)
    RunStore.open(tmp_path / "left", manifest()).finish(0.0)
    check_kind(tmp_path / "left", RUN)
    with held_card(tmp_path / "card"):
        (tmp_path / "card" / "judge-card.json").write_text("{}")
    check_kind(tmp_path / "card", JUDGE_CARD)


def test_nothing_lands_in_a_docs_tree(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"the docs .*mkdocs\.yml publishes"):
        check_kind(REPO_ROOT / "docs", RUN)  # this repository's own
    site = tmp_path / "site"
    (site / "pages").mkdir(parents=True)
    (site / "mkdocs.yml").write_text("site_name: s\ndocs_dir: pages\n")
    with pytest.raises(UserError, match=f"is inside {site / 'pages'}"):
        RunStore.open(site / "pages" / "runs" / "today", manifest())  # empty and new, but published all the same
    assert not (site / "pages" / "runs").exists()
    check_kind(site / "runs", RUN)  # beside the docs is fine


def test_the_site_leaves_out_a_run_s_files() -> None:
    from mkdocs.config import load_config

    excluded = load_config(str(REPO_ROOT / "mkdocs.yml"))["exclude_docs"]
    for name in ("trace.msgpack", "results.jsonl", "manifest.json", "summary.json", "writer.lock", "ray.log"):
        assert excluded.match_file(f"runs/demo/{name}"), name
    assert not excluded.match_file("guides/run.md")


def test_report_writes_only_into_a_run_directory(tmp_path: Path) -> None:
    comparison = tmp_path / "comparison"
    (comparison / "arms" / "self_refine").mkdir(parents=True)
    (comparison / "comparison.json").write_text("{}")
    done = redraft("report", str(comparison))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "is a comparison's directory, not a run's; its lanes' runs are its arms/NAME and baseline" in done.stderr
    assert sorted(p.name for p in comparison.iterdir()) == ["arms", "comparison.json"]
    done = redraft("report", str(photos(tmp_path / "photos")))
    assert done.returncode == 2 and "is not a run directory (no results.jsonl)" in done.stderr


def test_report_on_a_read_only_run_says_so_in_one_line(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "4m") as disk:
        run = make_run(disk / "run")
        remount(disk, "ro")
        done = redraft("report", str(run))
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert done.stderr.startswith(f"redraft: failed: cannot write the report in {run} (Read-only file system)")
        assert f"cp -r {run} COPY" in done.stderr
        remount(disk, "rw")
