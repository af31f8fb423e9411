"""The rubric stability figure under rubrics reworded in words: a model's (the judge's own by default, or
``--reword-model``), asked through the response cache, or the user's (``--rewordings FILE``), which keep priority;
each shown on the card's page and saved beside ``judge-card.json``; a reply or a file that is not a rewording
said in one line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from redraft.backends import ChatRequest, ScriptedSpec, resolve
from redraft.cli import main
from redraft.errors import UserError
from redraft.judging import (
    REWORDINGS_FILE,
    Judge,
    calibrate,
    load_rewordings,
    model_rewordings,
    read_card,
    rubric_of,
    write_card,
)
from tests.support import judges
from tests.support.fake_llm_servers import FakeLLMServer
from tests.unit.judging.test_calibration import labelled_set

RUBRIC = rubric_of(judges.RUBRIC)


def test_a_model_rewords_every_description_keeping_names_weights_scores_and_is_asked_once() -> None:
    with FakeLLMServer() as server:  # the real SDK, through the response cache
        server.reply_for = lambda body: judges.rewording_of(body["messages"][-1]["content"])
        spec = resolve(f"openai-compatible:rewriter@{server.openai_base_url}")
        made, left_out = asyncio.run(model_rewordings(RUBRIC, spec, 2))
        assert left_out == [] and len(made) == 2 and len(server.requests) == 2  # one call a rewording, own seed
        again, _ = asyncio.run(model_rewordings(RUBRIC, spec, 2))
        assert again == made and len(server.requests) == 2  # the response cache answered: nothing asked twice
    assert {seen.body["seed"] for seen in server.requests} == {0, 1}
    for rewording in made:
        assert rewording.source == "model" and rewording.by == spec.spec
        assert rewording.rubric.threshold == RUBRIC.threshold
        for old, new in zip(RUBRIC.criteria, rewording.rubric.criteria, strict=True):
            assert (new.name, new.weight) == (old.name, old.weight)
            assert new.description == f"{judges.REWORDED} {old.description}"
            assert [(lv.name, lv.score) for lv in new.levels] == [(lv.name, lv.score) for lv in old.levels]


def test_a_model_reply_that_is_not_a_rewording_is_left_out_and_said() -> None:
    made, left_out = asyncio.run(model_rewordings(RUBRIC, ScriptedSpec(judges.broken, spec="scripted:prose"), 2))
    assert made == [] and len(left_out) == 2 and "rewording 1 by scripted:prose left out" in left_out[0]

    def drops_a_level(request: ChatRequest) -> str:
        reply = json.loads(judges.rewords(request))
        reply["criteria"][0]["levels"].pop()
        return json.dumps(reply)

    made, left_out = asyncio.run(model_rewordings(RUBRIC, ScriptedSpec(drops_a_level, spec="scripted:drops"), 1))
    assert made == [] and "criterion 'correct': it words the levels ['good']" in left_out[0]


def test_stability_counts_the_model_s_rewordings_and_catches_a_judge_swayed_by_words() -> None:
    made, _ = asyncio.run(model_rewordings(RUBRIC, ScriptedSpec(judges.rewords, spec="scripted:rewords"), 2))
    fair = calibrate(Judge(ScriptedSpec(judges.faithful), RUBRIC), labelled_set(), rewordings=made)
    assert fair.figures["rubric_stability"].value == 1.0 and fair.figures["rubric_stability"].n == 80 * 4
    assert [r.source for r in fair.rewordings] == ["layout", "layout", "model", "model"]
    swayed = calibrate(Judge(ScriptedSpec(judges.swayed_by_words), RUBRIC), labelled_set(), rewordings=made)
    # under each of the 2 model rewordings, the 40 right answers fail: 80 of 320 verdicts moved
    assert swayed.figures["rubric_stability"].value == pytest.approx(1 - 80 / 320)
    assert not swayed.figures["rubric_stability"].passed
    layout_only = calibrate(Judge(ScriptedSpec(judges.swayed_by_words), RUBRIC), labelled_set())
    assert layout_only.figures["rubric_stability"].value == 1.0  # reordering alone cannot see this bias


def test_the_card_shows_each_rewording_and_saves_them_beside_it_to_give_back(tmp_path: Path) -> None:
    made, _ = asyncio.run(model_rewordings(RUBRIC, ScriptedSpec(judges.rewords, spec="scripted:rewords"), 1))
    card = calibrate(Judge(ScriptedSpec(judges.faithful), RUBRIC), labelled_set(3), rewordings=made)
    json_path, html_path = write_card(card, tmp_path)
    assert read_card(json_path).rewordings == card.rewordings
    page = html_path.read_text()
    assert "a model&#39;s words" in page and "scripted:rewords" in page and "criteria reversed" in page
    assert f"{judges.REWORDED} The answer is right." in page
    given_back = load_rewordings(tmp_path / REWORDINGS_FILE, RUBRIC)
    assert [r.rubric for r in given_back] == [r.rubric for r in made] and given_back[0].source == "user"


def test_a_rewordings_file_that_is_not_one_of_the_rubric_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "words.json"
    path.write_text(json.dumps({"rewordings": [{"criteria": [{"name": "correct", "description": "x", "levels": []}]}]}))
    with pytest.raises(UserError, match=r"words.json: rewording 1 is not one of rubric 'test': it words the criteria"):
        load_rewordings(path, RUBRIC)
    path.write_text("{}")
    with pytest.raises(UserError, match=r"words.json is not a file of rewordings"):
        load_rewordings(path, RUBRIC)


def _calibrate_args(tmp_path: Path, *extra: str) -> list[str]:
    rubric, answers = tmp_path / "rubric.json", tmp_path / "answers.jsonl"
    rubric.write_text(json.dumps(judges.RUBRIC))
    lines = [
        {"task_id": a.task.task_id, "prompt": a.task.prompt, "answer": a.text, "label": a.label} for a in labelled_set()
    ]
    answers.write_text("\n".join(json.dumps(line) for line in lines))
    judge = "scripted:tests.support.judges:faithful"
    out = str(tmp_path / "card")
    return [
        "judge",
        "calibrate",
        "--tasks",
        str(answers),
        "--rubric",
        str(rubric),
        "--judge",
        judge,
        "--out",
        out,
        *extra,
    ]


def test_the_command_asks_the_reword_model_and_the_user_s_rewordings_keep_priority(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(_calibrate_args(tmp_path, "--reword-model", "scripted:tests.support.judges:rewords"))
    total = 80 * (3 + 2 + 2) + 40  # each answer as it is, again, padded, under 2 layouts and 2 wordings; the pairs
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"judging: {total}/{total} judgments, ")
    card = read_card(tmp_path / "card")
    assert [(r.source, r.by) for r in card.rewordings][2:] == [("model", "scripted:tests.support.judges:rewords")] * 2
    saved = tmp_path / "card" / REWORDINGS_FILE
    assert len(json.loads(saved.read_text())["rewordings"]) == 2
    mine = tmp_path / "mine.json"
    mine.write_text(saved.read_text())
    capsys.readouterr()
    # A reword model that would fail is never asked: the user's rewordings are used instead.
    main(_calibrate_args(tmp_path, "--rewordings", str(mine), "--reword-model", "scripted:tests.support.judges:broken"))
    card = read_card(tmp_path / "card")
    assert [(r.source, r.by) for r in card.rewordings][2:] == [("user", "mine.json #1"), ("user", "mine.json #2")]
    assert "warning" not in capsys.readouterr().err


def test_a_judge_that_cannot_reword_leaves_the_layout_s_rewordings_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(_calibrate_args(tmp_path))  # the judge's own model (a scripted judge) is asked, and answers a grade
    err = capsys.readouterr().err
    assert err.count("redraft: warning: rewording") == 2 and "left out" in err
    card = read_card(tmp_path / "card")
    assert [r.source for r in card.rewordings] == ["layout", "layout"]
    assert not (tmp_path / "card" / REWORDINGS_FILE).exists()
