"""An Executable pickles as its lowered module plus object bytes and links again on load."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
from hypothesis import given, settings

import runtime
from irkernel.testing.strategies import functions_with_inputs
from irkernel.tir import script as T
from runtime.build import load_executable
from runtime.executable import SavedExecutable, SavedObject


@settings(max_examples=8, deadline=None)
@given(case=functions_with_inputs(module=True, shapes="small"))
def test_loaded_executable_runs_as_the_built_one(case) -> None:
    mod, inputs = case
    ex = runtime.build(mod, cache=False)
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(ex, protocol=5, buffer_callback=buffers.append)
    again = pickle.loads(data, buffers=buffers)
    assert list(again) == list(ex)
    for a, b in zip(ex["main"](*inputs), again["main"](*inputs), strict=True):
        np.testing.assert_array_equal(a, b)


@T.prim_func
def twice(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32")):
    for i in T.serial(8):
        b[i] = a[i] * 2.0


def test_a_kernel_executable_round_trips_with_its_sources() -> None:
    ex = runtime.build(twice, cache=False)
    again = pickle.loads(pickle.dumps(ex))
    out = np.empty(8, np.float32)
    again["twice"](np.arange(8, dtype=np.float32), out)
    assert out.tolist() == [2.0 * k for k in range(8)]
    assert "fmul" in again.get_source("llvm")


def test_another_cpu_or_a_bad_object_is_refused() -> None:
    ex = runtime.build(twice, cache=False)
    loader, (saved,) = ex.__reduce__()
    assert loader is load_executable
    assert isinstance(saved, SavedExecutable)
    assert saved.kernels["twice"].symbol.startswith("twice_")
    with pytest.raises(RuntimeError, match="compiled for"):
        loader(dataclasses.replace(saved, target_key="another-cpu"))
    bad = tuple(SavedObject(b"\x7fELF" + bytes(60), o.symbol) for o in saved.objects)
    with pytest.raises(RuntimeError, match="object 0 is not loadable"):
        loader(dataclasses.replace(saved, objects=bad))


def test_an_old_pickle_state_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="SavedExecutable"):
        load_executable(("mod", {}, [], (), False, "cpu"))  # type: ignore[arg-type]
