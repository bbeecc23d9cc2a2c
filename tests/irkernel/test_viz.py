"""irkernel.viz and ``irkernel viz``: DOT from the columns, fusion clusters, summaries,
structural diffs, graphviz rendering (when ``dot`` is on PATH) and its absence."""

from __future__ import annotations

import io
import re
import shutil
import subprocess

import numpy as np
import pytest

import irkernel as ik
import passes
from irkernel import viz
from irkernel.cli import main
from irkernel.cli.workloads import chain_module, mlp_module
from irkernel.testing import GraphSpec, random_function

HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="graphviz's dot is not on PATH")


def _nodes(dot: str) -> dict[str, str]:
    """DOT node id -> its label (nodes with a label only)."""
    return {m.group(1): m.group(2) for m in
            re.finditer(r'^\s*(n[\w]+) \[label="((?:[^"\\]|\\.)*)"', dot, re.M)}


def _edges(dot: str) -> list[tuple[str, str]]:
    return re.findall(r"^\s*(n\w+) -> (n\w+);", dot, re.M)


def _example() -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    one, two = bb.const(np.float32(1)), bb.const(np.float32(2))
    big = bb.const(np.arange(4, dtype=np.float32) + 10)  # 4 elements: folded (default 4)
    a = bb.exp(bb.multiply(x, one))
    b = bb.exp(x)
    y = bb.add(bb.add(a, b), bb.add(two, two))
    s = bb.sum(bb.add(y, big), axis=0)
    return ik.IRModule({"main": bb.finish([s])})


def test_one_dot_node_per_node_labelled_and_one_edge_per_operand() -> None:
    mod = _example()
    func = mod["main"]
    dot = viz.to_dot(mod)
    nodes = _nodes(dot)
    consts = set(np.flatnonzero(func.kind == ik.ops.OP_CONST).tolist())
    assert set(nodes) == {f"n{i}" for i in range(func.num_nodes) if i not in consts}
    for i in range(func.num_nodes):
        if i not in consts:
            name, shape = func.node_type(i)
            assert f"%{i} " in nodes[f"n{i}"]
            assert f"{name}[{', '.join(map(str, shape))}]" in nodes[f"n{i}"]
            assert func.op(i).name in nodes[f"n{i}"]
    want = sorted((f"n{v}", f"n{i}") for i in range(func.num_nodes)
                  for v in func.operands(i) if v not in consts)
    assert sorted(_edges(dot)) == want
    assert "args: %0, 1.0" in nodes["n4"]  # x * 1: the constant folded into the label
    assert "[10.0, 11.0, 12.0, 13.0]" in dot
    assert re.search(r"n\d+ \[label=\"%\d+ sum.*peripheries=2", dot)
    assert re.search(r'n0 \[label="%0 param x\\nfloat32\[4\]", shape=ellipse', dot)


def test_large_constants_are_drawn_not_folded() -> None:
    dot = viz.to_dot(_example(), fold_consts=1)
    assert re.search(r'\[label="%\d+ const\\nfloat32\[4\]"', dot)
    assert "[10.0" not in dot


def _fused() -> ik.IRModule:
    return passes.FuseOps()(passes.LegalizeOps()(mlp_module(4, 8, 2)))


def test_fusion_groups_are_clusters_coloured_by_pattern() -> None:
    mod = _fused()
    main_fn = mod["main"]
    calls = np.flatnonzero(main_fn.kind == ik.ops.OP_CALL_FUNC).tolist()
    assert calls
    dot = viz.to_dot(mod)
    clusters = re.findall(r"subgraph cluster_(\d+) \{\n\s*label=\"([^\"]*)\"; style=\"filled,"
                          r"rounded\"; fillcolor=\"(#\w+)\"", dot)
    assert sorted(int(c) for c, _, _ in clusters) == calls
    for _, label, color in clusters:
        pattern = label.rsplit("(", 1)[1].rstrip(")")
        assert viz.dot.PATTERN_COLORS[{v: k for k, v in ik.ops.PATTERN_NAMES.items()}[pattern]] \
            == color
        assert "out_ewise_fusable" in label  # matmul + bias + relu: the matmul's pattern
    # parameters stay outside the clusters: no edge inside a subgraph block
    for block in re.findall(r"subgraph cluster_\d+ \{(.*?)\n  \}", dot, re.S):
        assert "->" not in block
        assert "param" not in block


def test_collapsed_when_groups_do_not_fit_and_summary_when_nothing_fits() -> None:
    mod = _fused()
    full = viz.draw(mod)
    assert full.mode == "full"
    collapsed = viz.draw(mod, max_nodes=full.drawn - 1)
    assert collapsed.mode == "collapsed"
    assert "subgraph" not in collapsed.dot
    assert "call @fused" in collapsed.dot
    big = ik.IRModule({"main": random_function(GraphSpec(n_nodes=20_000, seed=1))})
    d = viz.draw(big, max_nodes=300)
    assert d.mode == "summary"
    assert d.drawn <= 300
    assert "20,000 nodes" in d.dot
    assert "op histogram" in d.dot
    assert re.search(r"const: [\d,]+", d.dot)
    assert "output cone" in d.dot
    out = int(big["main"].outputs[0])
    assert f"n{out} [" in d.dot  # the outputs are always drawn


def test_bad_arguments_name_what_is_wrong() -> None:
    mod = passes.LegalizeOps()(_example())
    with pytest.raises(ValueError, match="'nope'"):
        viz.to_dot(mod, "nope")
    prim = next(k for k, v in mod.functions.items() if not isinstance(v, ik.Function))
    with pytest.raises(ValueError, match="not a graph function"):
        viz.to_dot(mod, prim)
    with pytest.raises(ValueError, match="function="):
        viz.to_dot(mod["main"], "main")
    with pytest.raises(ValueError, match="max_nodes"):
        viz.to_dot(mod, max_nodes=0)
    with pytest.raises(ValueError, match="highlight"):
        viz.to_dot(mod, highlight=[10**6])
    with pytest.raises(TypeError, match="Function or an IRModule"):
        viz.to_dot("main")  # type: ignore[arg-type]


def test_structural_hashes_find_what_a_pipeline_changed() -> None:
    before = _example()
    after = passes.O2()(before)
    a, b = viz.node_hashes(before["main"]), viz.node_hashes(after["main"])
    assert viz.node_hashes(ik.parse(before.script())["main"]).tolist() == a.tolist()
    left = viz.draw(before, baseline=viz.hash_set(after))
    right = viz.draw(after, baseline=viz.hash_set(before))
    # kept as they were: the parameter and exp(x); CSE and folding rewrote the rest
    changed_left = {int(m) for m in re.findall(r'n(\d+) \[[^\n]*fillcolor="#ffab91"', left.dot)}
    unchanged = {i for i in range(before["main"].num_nodes) if a[i] in set(b.tolist())}
    drawn = {int(k[1:]) for k in _nodes(left.dot)}
    assert changed_left == drawn - unchanged
    assert left.highlighted == len(changed_left) > 0
    assert 0 < right.highlighted < after["main"].num_nodes


def test_fusion_alone_changes_nothing_in_the_diff() -> None:
    legal = passes.LegalizeOps()(chain_module(64))
    fused = passes.FuseOps()(legal)
    assert viz.draw(legal, baseline=viz.hash_set(fused)).highlighted == 0
    assert viz.draw(fused, baseline=viz.hash_set(legal)).highlighted == 0


@needs_dot
@pytest.mark.parametrize("make", [_example, _fused, lambda: chain_module(8),
                                  lambda: ik.IRModule({"main": random_function(
                                      GraphSpec(n_nodes=400, seed=2))})])
def test_dot_renders_every_picture(make) -> None:
    mod = make()
    for d in (viz.to_dot(mod), viz.to_dot(mod, max_nodes=40)):  # full and summarized
        svg = viz.render(d, "svg").decode()
        assert svg.lstrip().startswith("<?xml") or "<svg" in svg
        assert "<svg" in svg


@needs_dot
def test_quotes_and_backslashes_in_names_stay_valid_dot() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")
    y = bb.call_func('we"ird\\name', x, dtype="float32", shape=(3,))
    fb = ik.GraphBuilder('we"ird\\name', private=True)
    f = fb.finish([fb.negative(fb.param("a", (3,), "float32"))])
    mod = ik.IRModule({"main": bb.finish([y]), 'we"ird\\name': f})
    done = subprocess.run(["dot", "-Tcanon"], input=viz.to_dot(mod).encode(),
                          capture_output=True, check=False)
    assert done.returncode == 0, done.stderr


# ---------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------

@pytest.fixture
def ir_file(tmp_path):
    path = tmp_path / "g.ir"
    path.write_text(_example().script())
    return path


def test_cli_writes_dot_to_stdout_and_to_a_file(ir_file, tmp_path) -> None:
    out = io.StringIO()
    assert main(["viz", str(ir_file)], out=out) == 0
    assert out.getvalue().startswith('digraph "main" {')
    target = tmp_path / "g.dot"
    assert main(["viz", str(ir_file), "-p", "O2", "-o", str(target)]) == 0
    text = target.read_text()
    assert text == viz.to_dot(passes.O2()(_example()))


@needs_dot
@pytest.mark.parametrize("suffix", ["svg", "png", "html"])
def test_cli_renders_through_dot(ir_file, tmp_path, suffix: str) -> None:
    target = tmp_path / f"g.{suffix}"
    assert main(["viz", str(ir_file), "-p", "LegalizeOps,FuseOps", "-o", str(target)]) == 0
    data = target.read_bytes()
    if suffix == "png":
        assert data.startswith(b"\x89PNG")
    else:
        assert b"<svg" in data


@needs_dot
def test_cli_diff_is_one_self_contained_page(ir_file, tmp_path) -> None:
    target = tmp_path / "d.html"
    assert main(["viz", str(ir_file), "-p", "O2", "--diff", "-o", str(target)]) == 0
    page = target.read_text()
    assert page.count("<svg") == 2
    assert "before" in page
    assert "after O2" in page
    assert '#ffab91' in page.lower()  # highlighted nodes on both sides
    assert re.search(r"before: @main, \d+ nodes, [1-9]\d* changed", page)
    for fetch in ("<script", "<link", "src=", "@import", "url("):
        assert fetch not in page


def test_cli_without_dot_says_how_to_install_and_dot_still_works(ir_file, tmp_path,
                                                                  monkeypatch, capsys) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["viz", str(ir_file), "-o", str(tmp_path / "g.svg")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "apt-get install graphviz" in err[0]
    assert err[0].startswith("irkernel viz: error:")
    assert main(["viz", str(ir_file), "-o", str(tmp_path / "g.dot")]) == 0
    assert (tmp_path / "g.dot").read_text().startswith("digraph")


@pytest.mark.parametrize(("argv", "fragment", "code"), [
    # option values the command can not use are usage errors (2); a module without the
    # function asked for is an error in the input (1): the CLI's one exit-code rule
    (["--diff", "-o", "x.html"], "give -p", 2),
    (["-p", "O2", "--diff", "-o", "x.svg"], "HTML page", 2),
    (["-o", "x.jpg"], "suffix", 2),
    (["--max-nodes", "0"], "--max-nodes", 2),
    (["--function", "nope"], "'nope'", 1),
    (["-p", "NoSuchPass"], "NoSuchPass", 2),
])
def test_cli_errors_are_one_line(ir_file, capsys, argv: list[str], fragment: str,
                                 code: int) -> None:
    assert main(["viz", str(ir_file), *argv]) == code
    err = capsys.readouterr().err
    assert err.startswith("irkernel viz: error:")
    assert fragment in err.splitlines()[0]
    assert "Traceback" not in err


def test_cli_notes_a_summary_on_stderr(tmp_path, capsys) -> None:
    path = tmp_path / "big.ir"
    path.write_text(ik.IRModule({"main": random_function(GraphSpec(n_nodes=5000))}).script())
    assert main(["viz", str(path), "--max-nodes", "100", "-o", str(tmp_path / "b.dot")]) == 0
    assert "drawing a summary" in capsys.readouterr().err
