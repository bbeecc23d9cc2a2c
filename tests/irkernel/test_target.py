"""The CPU target description: read from LLVM and sysfs, named levels, the context knob."""

from __future__ import annotations

import pytest

from irkernel import transform
from irkernel.target import cpu_target, host_target
from irkernel.target.cpu import _caches
from passes.topi.vector import current_target, vector_bits


def test_host_target_is_consistent() -> None:
    host = host_target()
    assert host.isa in ("sse4.2", "avx2", "avx512")
    assert host.vector_bits == {"avx512": 512, "avx2": 256, "sse4.2": 128}[host.isa]
    assert host.vector_registers == (32 if host.vector_bits == 512 else 16)
    assert host.l1d < host.l2 <= host.l3 and host.cores >= 1
    assert host.lanes("float32") * 32 == host.vector_bits
    assert host.isa.upper() in host.describe()


def test_levels_keep_the_machine_and_change_the_isa() -> None:
    host = host_target()
    sse = cpu_target("sse4.2")
    assert sse == cpu_target("x86-64-v2")
    assert (sse.vector_bits, sse.vector_registers, sse.llvm_cpu) == (128, 16, "x86-64-v2")
    assert (sse.l2, sse.cores) == (host.l2, host.cores)
    assert sse.key != host.key
    with pytest.raises(ValueError, match="unknown CPU target 'avx9'"):
        cpu_target("avx9")
    if host.isa != "avx512":
        with pytest.raises(ValueError, match="does not have"):
            cpu_target("x86-64-v4")


def test_the_context_names_the_target_templates_read() -> None:
    with transform.PassContext(config={"target": "avx2"} if host_target().isa != "sse4.2"
                               else {"target": "sse4.2"}):
        assert current_target().isa in ("avx2", "sse4.2")
        assert vector_bits() in (256, 128)
    with transform.PassContext(config={"topi.vector_bits": 128}):
        assert current_target().vector_bits == 128
        assert current_target().vector_registers == 16
    with pytest.raises(ValueError, match="target"):
        transform.PassContext(config={"target": "pentium"})


def test_cache_sizes_from_sysfs(tmp_path) -> None:
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "2048K"), (3, "Unified", "64M")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert _caches(tmp_path) == (48 * 1024, 2048 * 1024, 64 * 1024 * 1024)
    assert _caches(tmp_path / "missing") == (32 * 1024, 1024 * 1024, 8 * 1024 * 1024)
