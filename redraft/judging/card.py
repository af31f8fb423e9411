"""A judge's card on disk: ``judge-card.json`` (every figure, for tools and for ``--judge-card``) and
``judge-card.html`` (the same, to look at, through the views' autoescaping templates); beside them, when the
card's rubric stability used rewordings in words (the user's or a model's), ``judge-rewordings.json`` (in the
``--rewordings`` file format, to edit and give back)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from redraft.errors import UserError
from redraft.judging.calibration import JudgeCard
from redraft.judging.rewording import REWORDINGS_FILE, rewordings_json
from redraft.protocols.bounds import bounded
from redraft.rundir import JUDGE_CARD, WriterLock, check_kind, hold
from redraft.views.templating import render

CARD_JSON, CARD_HTML = "judge-card.json", "judge-card.html"


def held_card(out: Path) -> WriterLock:
    """``out`` held while a card is measured and written there: a new, empty or judge card's directory (checked
    before a judgment is paid), one writer at a time (`redraft.rundir.hold`)."""
    check_kind(out, JUDGE_CARD)
    return hold(out)


def write_card(card: JudgeCard, out: Path) -> tuple[Path, Path]:
    """``judge-card.json`` and ``judge-card.html`` under ``out`` (made if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / CARD_JSON, out / CARD_HTML
    json_path.write_bytes(msgspec.json.format(msgspec.json.encode(card)) + b"\n")
    html_path.write_text(render("judge_card.html.j2", title="redraft judge card", c=card), encoding="utf-8")
    if any(r.source != "layout" for r in card.rewordings):
        (out / REWORDINGS_FILE).write_bytes(rewordings_json(card.rewordings))
    return json_path, html_path


def read_card(path: str | Path) -> JudgeCard:
    """A card written by `write_card` (``path``: the file, or the directory holding it); a `UserError` if not."""
    path = Path(path)
    path = path / CARD_JSON if path.is_dir() else path
    try:
        return bounded(msgspec.json.Decoder(JudgeCard).decode, path.read_bytes(), what=str(path))
    except OSError as exc:
        raise UserError(f"cannot read judge card {path}: {exc.strerror or exc}") from None
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise UserError(f"{path} is not a judge card: {exc}") from None
