"""``transform.reduce`` and its edits (``transform.reduce_edits``), against the interpreter.

Each edit, on random graphs and random chunks, gives a Function that verifies and
that the interpreter runs; the reducer's result verifies and keeps the predicate
true; ``irkernel reduce --test`` does the same through a shell script.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
from irkernel import testing, transform
from irkernel.cli.main import main
from irkernel.ir import ops
from irkernel.testing.miscompile import planted_module, shows_miscompile
from irkernel.transform import reduce_edits as edits


def _runs(func: ik.Function) -> None:
    ik.verify(func)
    ik.interpret(func, *testing.random_inputs(func))


def _chunks(func: ik.Function, rng: np.random.Generator) -> list[np.ndarray]:
    n = func.num_nodes
    starts = rng.integers(0, n, 4)
    return [np.arange(s, min(n, s + int(rng.integers(1, 20)))) for s in starts]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shapes", ["scalar", "small"])
def test_every_edit_gives_a_graph_the_interpreter_runs(seed: int, shapes: str) -> None:
    func = testing.random_function(120, seed=seed, shapes=shapes, n_outputs=3)
    rng = np.random.default_rng(seed)
    results = [edits.prune(func), edits.cut(func, 60),
               edits.keep_outputs(func, func.outputs[:1])]
    for chunk in _chunks(func, rng):
        results += [edits.to_params(func, chunk), edits.to_consts(func, chunk, 0),
                    edits.to_consts(func, chunk, 1), edits.bypass(func, chunk, 0),
                    edits.bypass(func, chunk, 1)]
    made = [r for r in results if r is not None]
    assert len(made) >= 10
    for out in made:
        _runs(out)
        assert out.num_nodes <= func.num_nodes


def test_edits_do_what_they_say() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")
    e = bb.call("exp", x)
    t = bb.call("tanh", e)
    s = bb.call("add", t, e)
    f = bb.finish([s])
    by = edits.bypass(f, np.array([t]), 0)  # tanh bypassed: add(exp x, exp x)
    assert [by.op(i).name for i in range(by.num_nodes)] == ["param", "exp", "add"]
    p = edits.to_params(f, np.array([e]))  # exp becomes an input; x is unused and goes
    assert [p.op(i).name for i in range(p.num_nodes)] == ["param", "tanh", "add"]
    assert p.param_names == (f"r{e}",)
    c = edits.to_consts(f, np.array([s]), 1)
    assert c.num_nodes == 1 and np.array_equal(c.const_value(0), np.ones(3, np.float32))
    assert edits.to_consts(c, np.array([0]), 1) is None  # already ones
    shrunk = edits.shrink_dim(f, 3, 1)
    ik.verify(shrunk)
    assert shrunk.node_type(int(shrunk.outputs[0])) == ("float32", (1,))


def test_cut_returns_the_values_handed_on() -> None:
    func = testing.random_function(200, seed=1, n_outputs=2)
    out = edits.cut(func, 100)
    _runs(out)
    assert out.num_nodes <= 100
    full = ik.interpret(func, *testing.random_inputs(func))
    assert len(full) == 2 and len(out.outputs) >= 1


def test_reduce_finds_the_planted_miscompile() -> None:
    mod = planted_module(20_000, seed=0)
    assert shows_miscompile(mod)
    lines: list[str] = []
    out = transform.reduce(mod, shows_miscompile, progress=lines.append)
    ik.verify(out)
    assert shows_miscompile(out)
    func = out["main"]
    assert func.num_nodes <= 20, out.script()
    names = {func.op(i).name for i in range(func.num_nodes)}
    assert {"multiply", "add", "tanh"} <= names
    assert lines and lines[-1].split("] ")[1].startswith(f"done: {func.num_nodes} graph nodes")


def test_a_predicate_that_raises_counts_as_false() -> None:
    func = testing.random_function(300, seed=2, dtypes=("float32",), n_outputs=2)

    def picky(mod: ik.IRModule) -> bool:
        f = mod["main"]
        if f.num_nodes < 5:
            raise RuntimeError("not this crash")
        return bool(np.any(f.kind == ops.get_op("tanh").opcode))

    out = transform.reduce(ik.IRModule({"main": func}), picky)
    assert picky(out) and out["main"].num_nodes >= 5


def test_a_predicate_that_hangs_or_crashes_counts_as_false() -> None:
    func = testing.random_function(40, seed=3, dtypes=("float32",))
    tanh = ops.get_op("tanh").opcode

    def fragile(mod: ik.IRModule) -> bool:
        f = mod["main"]
        if f.num_nodes < 4:
            os.abort()  # the process dies: only a child process can survive this
        if f.num_nodes < 8:
            time.sleep(600)
        return bool(np.any(f.kind == tanh))

    out = transform.reduce(ik.IRModule({"main": func}), fragile, timeout=0.5)
    assert out["main"].num_nodes >= 8 and np.any(out["main"].kind == tanh)


def test_unused_functions_go() -> None:
    mod = testing.random_module(200, seed=4, call_funcs=True, n_helpers=2)
    assert len(mod) >= 2
    out = transform.reduce(mod, lambda m: len(m["main"].outputs) >= 1)
    assert list(out.functions) == ["main"] and out["main"].num_nodes <= 2


def test_the_input_must_be_interesting() -> None:
    mod = ik.IRModule({"main": testing.random_function(20, seed=0)})
    with pytest.raises(transform.ReduceError, match="false on the input"):
        transform.reduce(mod, lambda m: False)
    with pytest.raises(TypeError, match="callable"):
        transform.reduce(mod, "yes")  # type: ignore[arg-type]


def test_cli_reduce_with_a_shell_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    func = testing.random_function(400, seed=5, dtypes=("float32",), n_outputs=3)
    (tmp_path / "big.ir").write_text(ik.IRModule({"main": func}).script())
    script = tmp_path / "has_sigmoid.sh"
    script.write_text('#!/bin/sh\ngrep -q "= sigmoid" "$1"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    texts = []
    for jobs in ("1", "2"):
        out = tmp_path / f"small-{jobs}.ir"
        code = main(["reduce", str(tmp_path / "big.ir"), "--test", str(script), "--timeout",
                     "20", "-j", jobs, "-o", str(out)])
        assert code == 0, capsys.readouterr().err
        texts.append(out.read_text())
    small = ik.parse(texts[0])
    ik.verify(small)
    assert small["main"].num_nodes <= 3 and "= sigmoid" in texts[0]
    assert texts[0] == texts[1]  # -j does not change the result


def test_cli_reduce_with_a_predicate_file(tmp_path: Path) -> None:
    mod = planted_module(3000, seed=1)
    assert shows_miscompile(mod)
    (tmp_path / "big.ir").write_text(mod.script())
    (tmp_path / "pred.py").write_text("from irkernel.testing.miscompile import shows_miscompile"
                                      " as interesting\n")
    out = tmp_path / "small.ir"
    code = main(["reduce", str(tmp_path / "big.ir"), "--predicate",
                 f"{tmp_path / 'pred.py'}:interesting", "-o", str(out)])
    assert code == 0
    assert ik.parse(out.read_text())["main"].num_nodes <= 20
    assert os.path.getsize(out) < os.path.getsize(tmp_path / "big.ir")


def _has_op(name: str):
    opcode = ops.get_op(name).opcode
    return lambda mod: bool(np.any(mod["main"].kind == opcode))


@pytest.mark.parametrize("seed", range(4))
def test_jobs_do_not_change_the_result(seed: int) -> None:
    """Concurrent candidates are read in order: jobs=2 takes what jobs=1 takes."""
    mod = planted_module(2000, seed=seed)
    assert shows_miscompile(mod)
    serial = transform.reduce(mod, shows_miscompile)
    threads = transform.reduce(mod, shows_miscompile, jobs=2)
    assert ik.structural_equal(serial, threads), (serial.script(), threads.script())
    other = ik.IRModule({"main": testing.random_function(300, seed=seed, n_outputs=4)})
    pred = _has_op("multiply")
    assert pred(other)
    serial = transform.reduce(other, pred)
    assert serial.script() == transform.reduce(other, pred, jobs=3).script()
    if seed == 0:  # forked children, killed when no longer needed
        forked = transform.reduce(mod, shows_miscompile, jobs=2, timeout=60)
        assert ik.structural_equal(transform.reduce(mod, shows_miscompile), forked)


def test_no_candidate_is_tried_twice() -> None:
    seen: list[int] = []

    def pred(mod: ik.IRModule) -> bool:
        seen.append(ik.structural_hash(mod))
        return shows_miscompile(mod)

    transform.reduce(planted_module(3000, seed=1), pred)
    assert len(seen) > 10 and len(set(seen)) == len(seen)


def _two_modules() -> tuple[ik.IRModule, ik.IRModule]:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")
    first = ik.IRModule({"main": bb.finish([bb.call("tanh", x)])})
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")
    return first, ik.IRModule({"main": bb.finish([bb.call("sigmoid", bb.call("exp", x))])})


def test_first_reads_the_answers_in_order() -> None:
    """The earlier candidate wins even when a later one answers first."""
    from irkernel.transform.reduce_oracle import Oracle

    slow_true, fast_true = _two_modules()

    def pred(mod: ik.IRModule) -> bool:
        if mod["main"].num_nodes == 2:
            time.sleep(0.3)
        return True

    oracle = Oracle(pred, jobs=2)
    assert oracle.first([slow_true, fast_true]) == 0
    assert oracle.first([None, slow_true, fast_true], want=False) == 0  # None is False
    assert oracle.first([slow_true, fast_true], want=False) is None
    assert oracle.calls == 2 and oracle.cached == 2  # the second and third: no calls
    assert oracle.unused == 1  # the fast call ran past the answer


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_call_no_longer_needed_is_killed(tmp_path: Path) -> None:
    from irkernel.transform.reduce_oracle import Oracle

    first, second = _two_modules()
    pidfile = tmp_path / "pid"

    def pred(mod: ik.IRModule) -> bool:
        if mod["main"].num_nodes == 2:  # the first: true once the second runs
            while not pidfile.exists():
                time.sleep(0.01)
            return True
        pidfile.write_text(str(os.getpid()))
        time.sleep(600)
        return False

    oracle = Oracle(pred, timeout=600, jobs=2)
    assert oracle.first([first, second]) == 0
    assert _dead(int(pidfile.read_text())) and oracle.unused == 1


def test_a_test_command_no_longer_needed_is_killed(tmp_path: Path) -> None:
    from irkernel.cli.reduce_cmd import CommandTest
    from irkernel.transform.reduce_oracle import Oracle

    first, second = _two_modules()
    script = tmp_path / "test.sh"
    script.write_text(f'#!/bin/sh\nif grep -q "= sigmoid" "$1"; then echo $$ > {tmp_path}/pid.tmp; '
                      f"mv {tmp_path}/pid.tmp {tmp_path}/pid; exec sleep 600; fi\n"
                      f"while [ ! -f {tmp_path}/pid ]; do sleep 0.01; done\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    oracle = Oracle(CommandTest(str(script), 600, str(tmp_path)), jobs=2)
    assert oracle.first([first, second]) == 0
    assert _dead(int((tmp_path / "pid").read_text())) and oracle.unused == 1
    assert not list(tmp_path.glob("candidate-*.ir"))  # each call removes its file
