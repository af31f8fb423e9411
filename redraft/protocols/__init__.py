"""What crosses an actor boundary: the typed messages and the convergence protocol."""

from redraft.errors import ProtocolError
from redraft.protocols.messages import decode, encode

__all__ = ["ProtocolError", "decode", "encode"]
