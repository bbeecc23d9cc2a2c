"""irkernel.testing.timing: each side in blocks of its own, warm-ups, pauses, BLAS threads."""

from __future__ import annotations

import pytest

from irkernel.testing import timing


def test_compare_runs_blocks_in_mirrored_order_with_warmups() -> None:
    calls: list[str] = []
    cmp = timing.compare(lambda: calls.append("a"), lambda: calls.append("b"), repeat=3,
                         warmups=2, pause=0.0, rounds=3)
    block = 2 + 3
    expected = ["a"] * block + ["b"] * block * 2 + ["a"] * block * 2 + ["b"] * block
    assert calls == expected
    assert len(cmp.ours.seconds) == len(cmp.ref.seconds) == 9  # warm-ups are not timed


def test_compare_ratio_is_ref_over_ours() -> None:
    cmp = timing.Comparison(timing.Samples((1.0, 2.0, 3.0)), timing.Samples((4.0, 6.0, 8.0)))
    assert cmp.ratio == 3.0
    assert cmp.best_ratio == 4.0


def test_compare_pauses_before_every_block(monkeypatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(timing.time, "sleep", slept.append)
    timing.compare(lambda: None, lambda: None, repeat=1, warmups=0, pause=0.25, rounds=2)
    assert slept == [0.25] * 4


@pytest.mark.parametrize(("kwargs", "word"), [
    ({"repeat": 0}, "repeat"), ({"warmups": -1}, "warmups"), ({"rounds": 0}, "rounds"),
    ({"pause": -1.0}, "pause")])
def test_compare_rejects_bad_arguments_naming_them(kwargs: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word):
        timing.compare(lambda: None, lambda: None, **{"pause": 0.0, **kwargs})


def test_blas_threads_limited_and_restored() -> None:
    import numpy as np  # noqa: F401  (loads NumPy's BLAS, which threadpoolctl then finds)

    before = timing.blas_threads()
    assert before is not None and before >= 1, "threadpoolctl finds no BLAS under NumPy"
    with timing.limit_blas(1) as limited:
        assert limited
        assert timing.blas_threads() == 1
    assert timing.blas_threads() == before


def test_without_a_blas_library_threads_are_unknown_and_not_limited(monkeypatch) -> None:
    monkeypatch.setattr(timing.threadpoolctl, "threadpool_info", lambda: [])
    assert timing.blas_threads() is None
    with timing.limit_blas(1) as limited:
        assert not limited


def test_limit_blas_rejects_zero_threads() -> None:
    with pytest.raises(ValueError, match="threads"), timing.limit_blas(0):
        pass
