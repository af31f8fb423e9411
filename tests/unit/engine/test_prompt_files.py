"""Prompts files: entries of prompts.toml overridden per run or per arm, every fault named before anything runs.

Without Ray: the checks, the fingerprint, and a drafter rendering the override.
With Ray: a comparison whose two arms differ only by a prompts file, where the
scripted model is right only when the drafter's prompt says so.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from redraft import RunConfig
from redraft.backends.scripted import ScriptedSpec
from redraft.comparison._arms import arms_from_file
from redraft.engine._model_role import CallSettings
from redraft.engine.drafter import Drafter
from redraft.engine.prompt_files import load_prompts
from redraft.engine.prompts import built_in, fenced
from redraft.errors import UserError
from redraft.protocols.messages import DraftRequest, Task
from redraft.rundir import fingerprint
from tests.support.replies import PLEASE
from tests.support.resolved import identity

OVERRIDE = f'[draft_task]\nversion = 7\ntext = """{PLEASE} The task is between its fence lines.\n$task"""\n'


def arms_with(tmp_path: Path, prompts_text: str) -> Path:
    (tmp_path / "mine.toml").write_text(prompts_text)
    arms = tmp_path / "arms.toml"
    arms.write_text(
        '[arms.plain]\nstrategy = "adversarial"\n\n[arms.nice]\nstrategy = "adversarial"\nprompts = "mine.toml"\n'
    )
    return arms


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[draft_tsk]\nversion = 2\ntext = "$task"\n',
            "unknown entry 'draft_tsk' (did you mean 'draft_task'? known: ",
        ),
        (
            '[draft_task]\nversion = 2\ntext = "Solve it."\n',
            "entry 'draft_task': field 'text' drops the placeholder $task",
        ),
        (
            '[draft_task]\nversion = 2\ntext = "$task for $who"\n',
            "field 'text' has the placeholder $who, which nothing fills",
        ),
        (
            '[draft_task]\nversion = 1\ntext = "Solve: $task"\n',
            "entry 'draft_task': the text differs from the built-in one but keeps its version 1",
        ),
        ('[draft_task]\ntext = "Solve: $task"\n', "entry 'draft_task': field 'version' must be a whole number"),
        ('[draft_task]\nversion = 2\ntext = "$task"\ndata = []\n', "unknown field 'data'"),
        ('[draft_task]\nversion = 2\ntext = "costs $5: $task"\n', "'$' that is no placeholder"),
        ("[draft_task\n", "not valid TOML"),
    ],
)
def test_a_bad_prompts_file_is_named_by_arms_file_arm_field_prompts_file_and_entry(
    tmp_path: Path, text: str, message: str
) -> None:
    arms = arms_with(tmp_path, text)
    with pytest.raises(UserError) as raised:
        arms_from_file(arms)
    said = str(raised.value)
    assert message in said, said
    assert said.startswith(f"arms file {arms}, arm 'nice': field 'prompts': prompts file {tmp_path / 'mine.toml'}")


def test_a_missing_prompts_file_is_named_too(tmp_path: Path) -> None:
    arms = tmp_path / "arms.toml"
    arms.write_text('[arms.nice]\nstrategy = "none"\nprompts = "gone.toml"\n')
    with pytest.raises(UserError, match=r"arm 'nice': field 'prompts': prompts file not found: .*gone\.toml"):
        arms_from_file(arms)


def test_an_override_changes_that_entry_alone_and_the_fingerprint(tmp_path: Path) -> None:
    [plain, nice] = arms_from_file(arms_with(tmp_path, OVERRIDE))[0]
    assert nice.settings["prompts"] == str(tmp_path / "mine.toml")  # relative to the arms file
    prompts = load_prompts(nice.settings["prompts"])
    assert prompts.versions() == built_in().versions() | {"draft_task": 7}
    assert {n: t for n, t in prompts.templates.items() if n != "draft_task"} == {
        n: t for n, t in built_in().templates.items() if n != "draft_task"
    }
    assert prompts.templates["draft_task"].data == built_in().templates["draft_task"].data  # still fenced
    base = RunConfig.build(scenario="arithmetic")
    ours, theirs = identity(base.replace(**nice.settings)), identity(base.replace(**plain.settings))
    assert ours["prompts"]["draft_task"] == 7 and theirs["prompts"]["draft_task"] == 1
    assert set(ours["prompt_overrides"]) == {"draft_task"} and theirs["prompt_overrides"] == {}
    assert fingerprint(ours) != fingerprint(theirs)
    # Same version, another text: still another configuration.
    (tmp_path / "mine.toml").write_text(OVERRIDE.replace("Please", "Do"))
    assert fingerprint(identity(base.replace(**nice.settings))) != fingerprint(ours)


def test_the_drafter_renders_the_override(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(OVERRIDE)
    echo = ScriptedSpec(script=lambda request: request.messages[-1].content)
    task = Task(task_id="t", scenario="arithmetic", prompt="Mia has 3 apples.")
    request = DraftRequest(task=task, round=0, sample=0, seed=1)
    for prompts, said in ((load_prompts(str(tmp_path / "mine.toml")), True), (None, False)):
        drafter = Drafter(
            echo, "arithmetic", CallSettings(temperature=0.0, max_tokens=64, cache=False, prompts=prompts)
        )
        draft = asyncio.run(drafter.draft(request))
        assert (PLEASE in draft.text) is said
        assert fenced(draft.text) == [task.prompt]  # the task is still fenced


def test_every_stance_has_its_critic_instructions_and_none_other_is_rendered() -> None:
    import typing

    from redraft.engine.prompts import built_in, critic_system
    from redraft.protocols.messages import Stance

    stances = typing.get_args(Stance)
    assert set(stances) == {"adversarial", "self", "skeptic"}
    texts = {stance: critic_system(stance) for stance in stances}
    assert len(set(texts.values())) == len(stances)  # each its own instructions, no fallback to another
    assert {f"critic_{s}" for s in stances} <= set(built_in().templates)
    with pytest.raises(KeyError):
        critic_system("friendly")  # type: ignore[arg-type]
