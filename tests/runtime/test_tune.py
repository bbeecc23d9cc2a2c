"""runtime.tune and tuned tiles (passes/topi/tuned.py, runtime/tuned_store.py, the CLI).

No timing asserts: which tile wins depends on the machine. What must hold anywhere: every
candidate tile computes bitwise the same conv as the analytic one (a tile never changes an
accumulation order) and the interpreter's values; tune finds each distinct implicit-GEMM
conv; the winners are stored per target and later builds use them; a bad stored entry
is a miss, never a crash or a wrong tile.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.cli.main import main as cli_main
from passes.topi.conv import conv_tile, conv_tile_candidates, scheduled_conv
from passes.topi.tuned import TUNED_TILES, TileTable, conv_key
from passes.topi.vector import current_target
from runtime.tune import conv_signatures
from runtime.tuned_store import cache_key, load_tuned, store_tuned


def _conv_net(c: int = 8, hw: int = 10, o: int = 12) -> ik.IRModule:
    """Two distinct 3x3 convs (one used twice) and a 1x1 conv on a tiny map."""
    rng = np.random.default_rng(0)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, c, hw, hw), "float32")
    w1 = bb.const(rng.standard_normal((o, c, 3, 3)).astype(np.float32))
    w2 = bb.const(rng.standard_normal((o, o, 3, 3)).astype(np.float32))
    w3 = bb.const(rng.standard_normal((o, o, 3, 3)).astype(np.float32))
    w4 = bb.const(rng.standard_normal((20, o, 1, 1)).astype(np.float32))
    y = bb.relu(bb.conv(x, w1, padding=[1, 1, 1, 1]))
    y = bb.relu(bb.conv(y, w2, padding=[1, 1, 1, 1]))
    y = bb.relu(bb.conv(y, w3, padding=[1, 1, 1, 1]))  # same signature as the one above
    y = bb.conv(y, w4)
    return ik.IRModule({"main": bb.finish(y)})


def _input(c: int = 8, hw: int = 10) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((1, c, hw, hw)).astype(np.float32)


def _schedules(ex: runtime.Executable, x: np.ndarray) -> list[str]:
    return sorted(row.schedule for row in ex.profile(x, repeat=1).rows
                  if row.schedule.startswith("conv_implicit_gemm"))


def test_conv_tile_narrows_to_one_vector_on_a_small_map() -> None:
    assert conv_tile(64, "float32", 512, pixels=9) == (8, 16)    # 16 columns for 9, not 32
    assert conv_tile(64, "float32", 512, pixels=61) == (8, 32)   # 64 columns either way
    assert conv_tile(64, "float32", 256, pixels=5) == (6, 8)
    assert conv_tile(64, "float32", 512, tuned=(12, 1)) == (11, 16)  # 6 blocks of 11 rows


@pytest.mark.parametrize("bits", [256, 512])
def test_candidates_fit_the_register_file(bits: int) -> None:
    regs = 32 if bits == 512 else 16
    found = conv_tile_candidates(64, bits)
    assert len(set(found)) == len(found) >= 4
    assert all(most * v + v + 1 <= regs for most, v in found)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=st.integers(1, 9), o=st.integers(1, 20), hw=st.integers(3, 11),
       k=st.sampled_from([1, 3]), stride=st.integers(1, 2), pick=st.integers(0, 1 << 30))
def test_every_candidate_is_bitwise_the_analytic_conv(c: int, o: int, hw: int, k: int,
                                                      stride: int, pick: int) -> None:
    pad = k // 2
    out = (hw + 2 * pad - k) // stride + 1
    args = ((1, c, hw, hw), (o, c, k, k), 1, (stride, stride), (pad, pad), (pad, pad),
            (1, 1), (out, out), "float32")
    bits = current_target().vector_bits
    candidates = conv_tile_candidates(o, bits)
    tile = candidates[pick % len(candidates)]
    ex = runtime.build(ik.IRModule({"analytic": scheduled_conv(*args, tile=()),
                                    "tuned": scheduled_conv(*args, tile=tile)}), cache=False)
    rng = np.random.default_rng(pick)
    x = rng.standard_normal(args[0]).astype(np.float32)
    w = rng.standard_normal(args[1]).astype(np.float32)
    a, b = (np.empty((1, o, out, out), np.float32) for _ in range(2))
    ex["analytic"](x, w, a)
    ex["tuned"](x, w, b)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), tile
    bb = ik.GraphBuilder("main")
    y = bb.conv(bb.param("x", args[0], "float32"), bb.const(w), strides=[stride, stride],
                padding=[pad] * 4)
    expected = ik.interpret(ik.IRModule({"main": bb.finish(y)}), x)[0]
    np.testing.assert_allclose(b, expected, rtol=1e-4, atol=1e-4)


def test_conv_signatures_are_the_distinct_implicit_gemm_convs() -> None:
    signatures = conv_signatures(_conv_net())
    assert [(s[0], s[1]) for s in signatures] == [
        ((1, 8, 10, 10), (12, 8, 3, 3)), ((1, 12, 10, 10), (12, 12, 3, 3)),
        ((1, 12, 10, 10), (20, 12, 1, 1))]


def test_a_tuned_tile_in_the_config_is_used_and_changes_no_bit() -> None:
    mod, x = _conv_net(), _input()
    plain = runtime.build(mod, cache=False)
    bits = current_target().vector_bits
    key = conv_key((1, 12, 10, 10), (12, 12, 3, 3), 1, (1, 1), (1, 1), (1, 1), (1, 1),
                   "float32", bits)
    with transform.PassContext(config={TUNED_TILES: TileTable.of({key: (4, 1)})}):
        tuned = runtime.build(mod, cache=False)
    lanes = bits // 32
    assert f"conv_implicit_gemm[4x{lanes}]" in _schedules(tuned, x)
    assert f"conv_implicit_gemm[4x{lanes}]" not in _schedules(plain, x)
    assert np.array_equal(plain["main"](x)[0], tuned["main"](x)[0])


def test_tune_stores_winners_that_later_builds_use(tmp_path) -> None:
    disk = runtime.DiskCache(tmp_path)
    mod, x = _conv_net(), _input()
    report = runtime.tune(mod, repeat=1, cache=disk)
    assert len(report.rows) == 3 and report.stored
    assert all(r.default_ms > 0 and r.best_ms > 0 and r.candidates >= 2 for r in report.rows)
    assert "conv:1,8,10,10;12,8,3,3" in report.render()
    assert load_tuned(disk, current_target()) == report.table
    # Whatever won, a stored tile is what a later build with this cache compiles:
    key = report.rows[1].key
    store_tuned(disk, current_target(), TileTable.of({key: (4, 1)}))
    ex = runtime.build(mod, cache=disk)
    lanes = current_target().vector_bits // 32
    assert f"conv_implicit_gemm[4x{lanes}]" in _schedules(ex, x)
    assert np.array_equal(ex["main"](x)[0], runtime.build(mod, cache=False)["main"](x)[0])


@pytest.mark.parametrize("payload", [
    b"not json", b"[1, 2]", b'{"target": "another|cpu", "tiles": {}}',
    b'{"target": "%s", "tiles": {"k": [0, 99]}}', b'{"target": "%s", "tiles": {"k": "8x32"}}',
    b"[" * 100000])
def test_a_bad_stored_table_is_a_miss(tmp_path, payload: bytes) -> None:
    disk = runtime.DiskCache(tmp_path)
    target = current_target()
    if b"%s" in payload:
        payload = payload % target.key.encode()
    disk.put("tuned", cache_key(target), payload)
    assert load_tuned(disk, target) == TileTable()
    assert not disk.path("tuned", cache_key(target)).exists()  # logged and removed
    mod, x = _conv_net(), _input()
    assert np.array_equal(runtime.build(mod, cache=disk)["main"](x)[0],
                          runtime.build(mod, cache=False)["main"](x)[0])


def test_tile_table_json_round_trip_and_errors() -> None:
    table = TileTable.of({"b": (8, 2), "a": (4, 1)})
    assert TileTable.from_json(table.to_json()) == table
    assert json.loads(table.to_json()) == {"a": [4, 1], "b": [8, 2]}
    assert table.get("a") == (4, 1) and table.get("c") is None
    with pytest.raises(ValueError, match="entry 'x'"):
        TileTable.from_json('{"x": [1, 2, 3]}')
    with pytest.raises(TypeError, match="expects TileTable"):
        transform.PassContext(config={TUNED_TILES: {"a": (1, 1)}})


def test_cli_tune(tmp_path, capsys) -> None:
    path = tmp_path / "net.ir"
    path.write_text(_conv_net().script())
    assert cli_main(["tune", str(path), "--repeat", "1", "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "tuned 3 conv(s)" in out and "not stored" in out
    assert cli_main(["tune", str(path), "--repeat", "0"]) == 2
    assert "--repeat must be >= 1" in capsys.readouterr().err
    assert cli_main(["tune", str(tmp_path / "missing.ir")]) == 1
