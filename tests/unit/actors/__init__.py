"""Unit tests of ``redraft.actors`` that need no Ray: the actor boundary, placement, redoing, metrics."""
