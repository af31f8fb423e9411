"""``redraft tune``'s proposer as a Ray actor: `ProposeRequest` frames in, `Proposal` frames out.

The request is decoded (validated) as it arrives and the reply encoded as it leaves, as for the loop's
roles (`redraft.actors._members`). A proposer whose process dies is restarted by Ray and the call retried;
a hung call ends at ``deadline_s`` and is asked again, once; a backend down for good fails the tune
(`BackendError`), which a rerun with the same ``--out`` resumes.
"""

from __future__ import annotations

from typing import Any

import ray

from redraft.actors._ray import set_up_actor_process
from redraft.backends.base import BackendSpec
from redraft.engine import CallSettings
from redraft.engine.proposer import Proposer
from redraft.errors import BackendError, ProtocolError
from redraft.protocols.tuning import Proposal, ProposeRequest, decode_tune, encode_tune

DEADLINE_S = 900.0


class ProposerActor:
    """The proposer behind the actor boundary."""

    def __init__(self, backend: BackendSpec, settings: CallSettings) -> None:
        set_up_actor_process()
        self._role = Proposer(backend, settings)

    async def serve(self, frame: bytes) -> bytes:
        request = decode_tune(frame)
        if not isinstance(request, ProposeRequest):
            raise ProtocolError(f"the proposer serves propose requests, not `{type(request).__name__}`")
        return encode_tune(await self._role.propose(request))


class RayProposer:
    """A proposer actor on the cluster, called from the tune's threads."""

    def __init__(self, backend: BackendSpec, settings: CallSettings, *, deadline_s: float = DEADLINE_S) -> None:
        options: dict[str, Any] = {"max_restarts": -1, "max_task_retries": 3, "max_concurrency": 64, "num_cpus": 0}
        actor_class: Any = ray.remote(ProposerActor)
        self._actor: Any = actor_class.options(**options).remote(backend, settings)
        self._deadline_s = deadline_s

    def __call__(self, request: ProposeRequest) -> Proposal:
        frame = encode_tune(request)
        for attempt in range(2):
            try:
                reply = decode_tune(ray.get(self._actor.serve.remote(frame), timeout=self._deadline_s))
            except ray.exceptions.GetTimeoutError:
                if attempt:
                    raise BackendError(f"the proposer did not answer within {self._deadline_s:g} s, twice") from None
                continue
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause if isinstance(exc.cause, Exception) else exc
                if isinstance(cause, BackendError | ProtocolError):
                    raise cause from None
                raise
            if not isinstance(reply, Proposal):
                raise ProtocolError(f"the proposer answered a `{type(reply).__name__}`, not a proposal")
            return reply
        raise AssertionError("unreachable")

    def close(self) -> None:
        ray.kill(self._actor)
