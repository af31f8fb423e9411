"""How llama.cpp splits a step's rows into graphs, as the batched host counts them."""

from __future__ import annotations

import pytest

from redraft.backends._llama_batch import graphs


@pytest.mark.parametrize(
    ("slots", "expected"),
    [
        ([], 0),
        ([5], 1),
        ([0, 1, 2, 3], 1),
        ([3, 2, 1, 0], 4),  # each row's id is not one more than the last taken
        ([0, 2, 1, 3], 2),  # 0 then 1; then 2 then 3
        ([0, 1, 3, 5], 3),  # sorted, but with gaps: a graph per run
        ([1, 2, 0], 2),
    ],
)
def test_a_graph_takes_rows_whose_ids_follow_one_another(slots: list[int], expected: int) -> None:
    assert graphs(slots) == expected
