"""An answer with citations, read back as claims, and the written rules it is checked by exactly.

An answer is read line by line (a list marker, ``-``, ``*`` or ``1.``, left out) and each line cut into
sentences: a sentence ends at ``.``, ``!`` or ``?`` (with any closing quote, any bracketed citations and one
more stop right after it) followed by the line's end or by a space and anything but a small letter, or at the
line's end. A sentence is a `Claim`: its words,
the sentence ids it cites (``[S3]``, ``[S2, S5]``, several groups allowed) and any bracketed text that is not
a citation. A sentence that holds no letter or digit outside its brackets is no claim.

Each rule has one check, reading the claims and what a user has (the document's sentences, the word limit):
every claim cites a sentence (`check_cited`), every cited id is one of the document's (`check_ids`), every
quotation is word for word in a sentence its own claim cites (`check_quotes`), the answer keeps its word limit
(`check_length`). The exact reply `NOT_SAID` is a claim that needs no citation. None of them can tell whether
the answer is right, answers the question, or is supported by what it cites: that is the rubric's, a judge's.

Invariants: no check raises, whatever the text; a word is a whitespace-separated run holding a letter or a
digit, outside the citations; quotations are compared with their runs of whitespace made single spaces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from redraft.protocols.messages import CheckResult
from redraft.scenarios.builtin._incident_rules import rule_result
from redraft.scenarios.builtin._incident_rules import words as plain_words

NOT_SAID = "The document does not say."
CITATION = re.compile(r"\[\s*(S\d+(?:\s*,\s*S\d+)*)\s*\]")
_BRACKETS = re.compile(r"\[[^\[\]\n]*\]")
_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_SENTENCE = re.compile(r"\S.*?(?:[.!?]+[\"'”’)]*(?:\s*\[[^\[\]]*\])*[.!?]?(?=\s*$|\s+[^\sa-z])|$)")
_QUOTE = re.compile(r"\"([^\"]+)\"|“([^”]+)”")
_SHOWN = 60
"""How much of a faulty sentence a detail quotes."""


@dataclass(frozen=True)
class Claim:
    """One sentence of an answer: its text without citations, the ids it cites, its brackets that cite nothing."""

    text: str
    cited: tuple[int, ...]
    stray: tuple[str, ...]

    @property
    def not_said(self) -> bool:
        """Whether the claim is the reply for a question the document does not answer."""
        return _spaced(self.text).rstrip(".").casefold() == NOT_SAID.rstrip(".").casefold()

    def quotations(self) -> list[str]:
        return [_spaced(a or b) for a, b in _QUOTE.findall(self.text) if any(ch.isalnum() for ch in a or b)]


def _spaced(text: str) -> str:
    return " ".join(text.split())


def read_claims(text: str) -> list[Claim]:
    """The claims of ``text``, in order."""
    claims = []
    for raw in text.splitlines():
        line = _MARKER.sub("", raw).strip()
        for found in _SENTENCE.finditer(line):
            sentence = found.group(0)
            cited = tuple(int(i[1:]) for group in CITATION.findall(sentence) for i in re.split(r"\s*,\s*", group))
            stray = tuple(b for b in _BRACKETS.findall(sentence) if not CITATION.fullmatch(b))
            words = _spaced(_BRACKETS.sub(" ", sentence))
            if any(ch.isalnum() for ch in words):
                claims.append(Claim(text=words, cited=cited, stray=stray))
    return claims


def words(text: str) -> list[str]:
    """The answer's words, its citations left out."""
    return plain_words(CITATION.sub(" ", text))


def _shown(claim: Claim) -> str:
    return repr(claim.text if len(claim.text) <= _SHOWN else claim.text[: _SHOWN - 3] + "...")


def check_cited(claims: Sequence[Claim]) -> CheckResult:
    """Rule 2: every claim cites at least one sentence, as ``[S3]`` (the exact `NOT_SAID` reply excepted)."""
    if not claims:
        return rule_result("cited", ["the answer is empty; answer the question, citing the document"], "")
    uncited = [c for c in claims if not c.cited and not c.not_said]
    faults = []
    if uncited:
        faults.append(f"{len(uncited)} sentence(s) cite nothing, e.g. {_shown(uncited[0])}")
    stray = [b for c in claims for b in c.stray]
    if stray:
        faults.append(f"{', '.join(stray[:3])} is not a citation")
    if faults:
        faults.append("end every sentence with the ids of the sentences that support it, as [S3] or [S2, S5]")
    said = any(not c.not_said for c in claims)
    return rule_result(
        "cited", faults, "every sentence cites the document" if said else f"{NOT_SAID!r} needs no citation"
    )


def check_ids(claims: Sequence[Claim], count: int) -> CheckResult:
    """Rule 3: every cited id is a sentence of the document (S1 to S``count``)."""
    absent = sorted({i for c in claims for i in c.cited if not 1 <= i <= count})
    if absent:
        named = ", ".join(f"S{i}" for i in absent[:5])
        return rule_result("ids", [f"the document has no sentence {named}; its ids run S1 to S{count}"], "")
    return rule_result("ids", [], "every cited id is the document's")


def check_quotes(claims: Sequence[Claim], sentences: Sequence[str]) -> CheckResult:
    """Rule 4: every quotation is word for word in a sentence its own claim cites."""
    document = [_spaced(s) for s in sentences]
    faults = []
    for claim in claims:
        cited = [document[i - 1] for i in claim.cited if 1 <= i <= len(document)]
        for quote in claim.quotations():
            if any(quote in sentence for sentence in cited):
                continue
            elsewhere = [n for n, sentence in enumerate(document, start=1) if quote in sentence]
            shown = repr(quote[:_SHOWN])
            if elsewhere:
                faults.append(f"{shown} is in S{elsewhere[0]}, which its sentence does not cite")
            else:
                faults.append(f"{shown} is not word for word in any sentence of the document")
    return rule_result("quotes", faults, "every quotation is in a sentence it cites")


def check_length(text: str, max_words: int) -> CheckResult:
    """Rule 1: at most ``max_words`` words, the citations not counted."""
    count = len(words(text))
    if count > max_words:
        return rule_result(
            "length", [f"{count} words; the limit is {max_words}: cut what the question does not ask"], ""
        )
    return rule_result("length", [], f"{count} words")
