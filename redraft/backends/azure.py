"""Azure OpenAI: ``azure:DEPLOYMENT`` or ``azure:DEPLOYMENT@https://RESOURCE.openai.azure.com``.

Read as the openai SDK's ``AzureOpenAI`` reads them, where the spec is parsed (the driver), so that
every worker calls the resource the driver names:

- the endpoint: the spec's URL, else ``AZURE_OPENAI_ENDPOINT``;
- the API version: ``OPENAI_API_VERSION`` (e.g. ``2024-10-21``), sent as the ``api-version`` query;
- the key: ``AZURE_OPENAI_API_KEY``, read inside the actor (as ``openai:`` reads its own), sent in an
  ``api-key`` header, never stored in the spec, a message or a log line.

A missing one is a `UserError` naming its variable, before anything starts. The calls are the
``openai:`` backend's (`redraft.backends.openai`): the same body, retries, usage and structured
output, through ``AsyncAzureOpenAI``.

Prices: a deployment is priced by its own name, in the estimate and in the run alike (Azure answers
with the name of the model it serves, which a deployment named otherwise would not match). The
built-in table prices a deployment named after its model by the longest prefix (``gpt-4o-mini-prod``
is ``gpt-4o-mini``); any other needs a ``--prices`` entry under the deployment's name, or it is
unpriced: its calls count 0 USD, so USD budgets do not stop them and the end table names it.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from redraft.backends.openai import _SCHEME, AZURE_KEY_ENV, AzureTarget, OpenAISpec
from redraft.backends.registry import backend
from redraft.errors import UserError

ENDPOINT_ENV = "AZURE_OPENAI_ENDPOINT"
VERSION_ENV = "OPENAI_API_VERSION"
USAGE = "'azure:DEPLOYMENT', or 'azure:DEPLOYMENT@https://RESOURCE.openai.azure.com'"
_DEPLOYMENT = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""What Azure allows in a deployment's name."""


@backend("azure")
def parse_azure(rest: str) -> OpenAISpec:
    """``azure:DEPLOYMENT[@URL]``; `UserError` naming the variable for a missing endpoint, version or key."""
    parts = _SCHEME.split(rest.strip(), maxsplit=1)
    deployment = parts[0].strip()
    if not deployment:
        raise UserError(f"the azure backend needs a deployment: {USAGE}")
    if not _DEPLOYMENT.fullmatch(deployment):
        raise UserError(
            f"the azure backend's deployment {deployment[:60]!r} is not a deployment's name (letters, digits, "
            f"'-', '_', '.'), or its endpoint is not https://: {USAGE}"
        )
    endpoint = parts[1] if len(parts) == 2 else os.environ.get(ENDPOINT_ENV, "").strip()
    if not endpoint:
        raise UserError(
            f"azure:{deployment} needs the resource's endpoint: set {ENDPOINT_ENV} "
            f"(https://RESOURCE.openai.azure.com) or write azure:{deployment}@https://RESOURCE.openai.azure.com"
        )
    _check_url(endpoint)
    version = os.environ.get(VERSION_ENV, "").strip()
    if not version:
        raise UserError(f"azure:{deployment} needs an API version: set {VERSION_ENV} (e.g. 2024-10-21)")
    if not os.environ.get(AZURE_KEY_ENV):
        raise UserError(f"azure:{deployment} needs an API key: set {AZURE_KEY_ENV}")
    endpoint = endpoint.rstrip("/")
    return OpenAISpec(
        model=deployment,
        spec=f"azure:{deployment}@{endpoint}",  # the resource too: the cache and the limiter are per endpoint
        azure=AzureTarget(endpoint=endpoint, api_version=version),
    )


def _check_url(url: str) -> None:
    parsed = urlsplit(url)
    if parsed.scheme not in ("http", "https"):
        raise UserError(f"the Azure endpoint must start with https://, got {url!r}: {USAGE}")
    if parsed.username or parsed.password:  # the spec is logged and traced: credentials belong in the variable
        raise UserError(f"put the key in {AZURE_KEY_ENV}, not in the Azure endpoint")
    if not parsed.hostname:
        raise UserError(f"the Azure endpoint has no host: {url!r}")
