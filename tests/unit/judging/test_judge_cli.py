"""``redraft judge calibrate``: the card written and printed, thresholds from options, and an exit code a
pipeline can stop on when the card fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from redraft.cli import main
from redraft.judging import load_rubric
from redraft.judging.rubric import reworded
from tests.support import judges


def _inputs(tmp_path: Path) -> list[str]:
    rubric, answers = tmp_path / "rubric.json", tmp_path / "answers.jsonl"
    rubric.write_text(json.dumps(judges.RUBRIC))
    lines = [
        {
            "task_id": f"t{n}",
            "prompt": f"{n}+{n}?",
            "answers": [{"text": f"CORRECT {2 * n}", "label": True}, {"text": f"It is {2 * n + 1}", "label": False}],
        }
        for n in range(40)
    ]
    answers.write_text("\n".join(json.dumps(line) for line in lines))
    return ["judge", "calibrate", "--tasks", str(answers), "--rubric", str(rubric), "--out", str(tmp_path / "card")]


def test_a_failing_card_is_written_and_exits_5(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*_inputs(tmp_path), "--judge", "scripted:tests.support.judges:first"])
    assert exited.value.code == 5
    out, progress = capsys.readouterr()
    assert "position_flip_rate  1.000 [0.912, 1.000]  <= 0.1  n=40  FAIL" in out
    total = 80 * (3 + len(reworded(load_rubric(tmp_path / "rubric.json")))) + 40  # 80 answers, 40 pairs
    assert progress.splitlines()[-1].startswith(f"judging: {total}/{total} judgments, ")
    card = json.loads((tmp_path / "card" / "judge-card.json").read_text())
    assert card["passed"] is False and card["figures"]["position_flip_rate"]["passed"] is False
    assert (tmp_path / "card" / "judge-card.html").is_file()


def test_a_threshold_option_moves_the_verdict(tmp_path: Path) -> None:
    main([*_inputs(tmp_path), "--judge", "scripted:tests.support.judges:first", "--position-flip-rate", "1"])
    card = json.loads((tmp_path / "card" / "judge-card.json").read_text())
    assert card["passed"] is True and card["thresholds"]["position_flip_rate"] == 1.0
    assert card["thresholds"]["agreement"] == 0.8  # the rest keep their defaults


def test_a_wrong_rubric_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _inputs(tmp_path)
    (tmp_path / "rubric.json").write_text("{}")
    with pytest.raises(SystemExit) as exited:
        main([*args, "--judge", "scripted:tests.support.judges:faithful"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("redraft: error:") and "criteria" in err and err.count("\n") == 1
