"""The drafter role: writes candidates, fresh or revised from the arbiter's feedback.

A revision in ``patch`` mode asks the model for search/replace edits and applies
them to the best candidate so far (`redraft.engine._patches`); the Draft carries
the patched text and why each refused edit did not apply. The drafter also
reflects on a failed attempt when asked (Reflexion's verbal memory).

A run with a stronger model (``--escalate``) gives every drafter a second client:
a request whose `Intent` says ``escalate`` is drafted by it, the rest by the
drafter's own model. Both live in the one role, so an escalation is placed,
retried, cached and traced as every draft is, in one process and on a cluster;
its `Draft.model` names the stronger model, and its call is priced at its price.

A reply with no text at all is returned as a draft with its cost, and the task loop drops it as a
`ModelError` (`redraft.engine._failures.empty_draft`: the sample is dropped, as a failed call is, its cost
kept); any other text, however wrong, is a candidate for the verifier to judge.
"""

from __future__ import annotations

from redraft.backends.base import Backend, BackendSpec
from redraft.engine._answers import plan_json_schema
from redraft.engine._model_role import CallSettings, ModelRole, client
from redraft.engine._patches import apply_edits
from redraft.engine._plan_prompts import plan_messages
from redraft.engine.pools import Reply, Request
from redraft.engine.prompts import built_in, draft_messages, reflect_messages
from redraft.errors import ProtocolError
from redraft.protocols.messages import Draft, DraftRequest, Reflection, ReflectRequest
from redraft.scenarios import get_scenario
from redraft.services import current

REFLECTION_MAX_TOKENS = 96
_SCHEMAS = {"plan": plan_json_schema("plan"), "decide": plan_json_schema("decision")}
"""What a plan's and a decision's replies must follow, where the backend can enforce it (a grammar, a tool)."""


class Drafter(ModelRole):
    """`DraftRequest` in, `Draft` out; `ReflectRequest` in, `Reflection` out."""

    def __init__(
        self, backend: BackendSpec, scenario: str, settings: CallSettings, escalate: BackendSpec | None = None
    ) -> None:
        super().__init__(backend, settings)
        self._escalated: Backend | None = None if escalate is None else client(escalate, settings)
        instructions = get_scenario(scenario).system_prompt()
        self._system = (self._prompts or built_in()).render("draft_system", instructions=instructions)
        self._node = current().node()  # a role never moves: ask once, not per draft

    async def serve(self, request: Request) -> Reply:
        match request:
            case DraftRequest():
                return await self.draft(request)
            case ReflectRequest():
                return await self.reflect(request)
        raise ProtocolError(f"the drafter does not serve `{type(request).__name__}` requests")

    async def draft(self, request: DraftRequest) -> Draft:
        plan = request.plan
        patch = request.mode == "patch" and request.revision is not None and plan is None
        if plan is not None:
            prompt = plan_messages(self._system, request.task, plan, self._prompts)
        else:
            prompt = draft_messages(
                self._system, request.task, request.revision, stage=request.stage, patch=patch, prompts=self._prompts
            )
        schema = None if plan is None or plan.kind == "step" else _SCHEMAS[plan.kind]
        completion = await self._model_for(request).complete(
            prompt.request(
                request.task.task_id,
                max_tokens=self._max_tokens,
                temperature=self._temperature,
                seed=request.seed,
                json_schema=schema,
            )
        )
        text, applied, errors = completion.text, 0, []
        if patch:
            assert request.revision is not None
            patched = apply_edits(request.revision.best_text, completion.text)
            text, applied, errors = patched.text, patched.applied, patched.errors
        # An empty text is returned as it came, with what its call cost: the task loop drops it as a failed call
        # (`redraft.engine._task_loop.empty_draft`), and keeps that cost, even when the task ends on it.
        return Draft(
            task_id=request.task.task_id,
            round=request.round,
            sample=request.sample,
            text=text,
            usage=completion.usage,
            model=completion.model,
            finish_reason=completion.finish_reason,
            latency_s=completion.latency_s,
            node_id=self._node,
            stage=_stage(request),
            edits_applied=applied,
            edit_errors=errors,
            messages=prompt.messages,
        )

    def _model_for(self, request: DraftRequest) -> Backend:
        """The stronger model's client for an escalation, the drafter's own for every other draft."""
        if request.intent is None or request.intent.action != "escalate":
            return self._backend
        if self._escalated is None:
            raise ProtocolError("an escalation was asked of a drafter with no stronger model (--escalate)")
        return self._escalated

    async def reflect(self, request: ReflectRequest) -> Reflection:
        draft = request.draft
        prompt = reflect_messages(request.task, draft.text, request.failed_checks, self._prompts)
        completion = await self._backend.complete(
            prompt.request(request.task.task_id, max_tokens=REFLECTION_MAX_TOKENS, temperature=0.0, seed=request.seed)
        )
        return Reflection(
            task_id=draft.task_id,
            round=draft.round,
            sample=draft.sample,
            text=" ".join(completion.text.split())[:500],
            usage=completion.usage,
            model=completion.model,
            messages=prompt.messages,
        )


def _stage(request: DraftRequest) -> str | None:
    """What a draft is of: a ``stepwise`` stage, or a plan's ask (``plan``, ``step-2``, ``decide-2``)."""
    plan = request.plan
    if plan is not None:
        return plan.kind if plan.step is None else f"{plan.kind}-{plan.step}"
    return request.stage.name if request.stage else None
