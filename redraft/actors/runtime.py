"""What a role needs to know about where it runs, without importing Ray at module load."""

from __future__ import annotations


def node_id() -> str:
    """The Ray node id of this process, or '' outside a Ray worker."""
    import ray

    if not ray.is_initialized():
        return ""
    return str(ray.get_runtime_context().get_node_id())
