"""What crosses an actor boundary, and the rules of the game."""

from redraft.protocols.messages import ProtocolError, decode, encode

__all__ = ["ProtocolError", "decode", "encode"]
