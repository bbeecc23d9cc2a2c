"""Is a byte string an object file the host can load, defining a given symbol?

The on-disk cache hands object files to LLVM's JIT linker (RuntimeDyld), which
trusts them: a payload that is not an object file for this target crashes the
process inside llvmlite. So an object read from the cache is checked first,
with pyelftools (a maintained, pure-Python ELF parser; llvmlite's
``ObjectFileRef`` only iterates sections of an object LLVM already accepted,
and creating one from garbage is itself what crashes):

- the ELF header: magic, class (32/64-bit), byte order and machine of the
  target triple, type relocatable (what ``TargetMachine.emit_object`` writes),
  a section-name string table;
- every section's bytes lie inside the file (except ``SHT_NOBITS``), its name
  inside the name table, its ``sh_link`` names a section, its alignment is a
  power of two, it is not thread-local; string tables are NUL-terminated;
- symbol tables: entries of the class's size, names inside their string
  table, section indices that name a section (or are reserved), no
  thread-local symbols, the expected function symbol defined, and its ABI
  record ``<symbol>__abi`` defined as data of ``ABI_RECORD_SIZE`` bytes (the
  loader reads it, ``runtime/abi.py``: a record of another size would be read
  past its end);
- relocation sections: each names a symbol table and a target section that
  exist, every entry's symbol index and offset lie inside them, and (x86-64)
  its type is one that LLVM emits and its JIT linker implements.

Each rule is one that LLVM's loader asserted on or aborted over when
``tests/fuzz`` fed it mutated objects that passed the rules before it.

These are the fields the loader indexes with. What an object *computes* is not
checked: an entry whose sha256 matches was written by this cache's owner
(``docs/cache.md`` has the threat model); crash-safe loading
(``DiskCache.loading``) covers the rest.

Only ELF hosts are checked (Linux and the BSDs: what this project runs on);
for other object formats :func:`object_problem` reports that it can not tell,
and the cache treats the entry as a miss. Imports pyelftools and the standard
library only.
"""

from __future__ import annotations

import functools
import io
import logging
import struct
import threading
from collections.abc import Callable
from typing import Any

_LOG = logging.getLogger("runtime.objfile")

#: Architecture (first field of the triple) -> (e_machine, ELF class, little endian).
_MACHINES = {
    "x86_64": ("EM_X86_64", 64, True), "amd64": ("EM_X86_64", 64, True),
    "aarch64": ("EM_AARCH64", 64, True), "arm64": ("EM_AARCH64", 64, True),
    "ppc64le": ("EM_PPC64", 64, True), "ppc64": ("EM_PPC64", 64, False),
    "s390x": ("EM_S390", 64, False), "riscv64": ("EM_RISCV", 64, True),
    "i386": ("EM_386", 32, True), "i686": ("EM_386", 32, True),
}
#: Every kernel ``s`` defines the constant ``s + ABI_SUFFIX`` (its ABI record) of this size.
ABI_SUFFIX = "__abi"
ABI_RECORD_SIZE = 24
_NOT_ELF = ("darwin", "macos", "ios", "windows", "win32", "cygwin", "mingw")


@functools.cache
def _elftools() -> Any:
    """pyelftools, imported on the first check (it takes ~20-40 ms to import, which a
    process that never loads a cached object should not pay), with an ``ELFFile`` that
    builds its struct definitions once per layout instead of once per file (5 ms each:
    the difference between 6 ms and 0.4 ms per object)."""
    from types import SimpleNamespace

    from elftools.common.exceptions import ELFError, ELFParseError
    from elftools.construct.core import ConstructError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection
    from elftools.elf.sections import StringTableSection, SymbolTableSection
    from elftools.elf.structs import ELFStructs

    structs: dict[tuple[Any, ...], Any] = {}
    lock = threading.Lock()

    def layout(key: tuple[Any, ...]) -> Any:
        with lock:
            found = structs.get(key)
            if found is None:
                found = structs[key] = ELFStructs(little_endian=key[0], elfclass=key[1])
                found.create_basic_structs()
                if len(key) > 2:
                    found.create_advanced_structs(*key[2:])
            return found

    class CachedELFFile(ELFFile):  # type: ignore[misc]
        """``ELFFile.__init__`` (pyelftools 0.31-0.33) with shared, immutable structs."""

        def __init__(self, stream: Any) -> None:
            self.stream = stream
            stream.seek(0, io.SEEK_END)
            self.stream_len = stream.tell()
            self._identify_file()
            key = (self.little_endian, self.elfclass)
            self.structs = layout(key)
            self.header = self._parse_elf_header()
            self.structs = layout((*key, self["e_type"], self["e_machine"],
                                   self["e_ident"]["EI_OSABI"]))
            stream.seek(0)
            self.e_ident_raw = stream.read(16)
            self.stream_loader = None

    def open_elf(data: bytes) -> Any:
        try:
            return CachedELFFile(io.BytesIO(data))
        except (AttributeError, TypeError):  # another pyelftools: its own constructor
            _LOG.debug("pyelftools changed its ELFFile internals; parsing without sharing")
            return ELFFile(io.BytesIO(data))

    #: What pyelftools (and the struct/construct layers under it) raise on bad input.
    errors = (ELFError, ELFParseError, ConstructError, struct.error, ValueError, KeyError,
              IndexError, UnicodeDecodeError, OverflowError, EOFError)
    return SimpleNamespace(open=open_elf, errors=errors, RelocationSection=RelocationSection,
                           StringTableSection=StringTableSection,
                           SymbolTableSection=SymbolTableSection)


def expected_format(triple: str) -> tuple[str, int, bool] | None:
    """(e_machine, class, little endian) of ELF objects for ``triple``; None if not ELF."""
    parts = triple.lower().split("-")
    if any(os_name in part for part in parts[1:] for os_name in _NOT_ELF):
        return None
    return _MACHINES.get(parts[0])


def object_problem(data: bytes, symbol: str, triple: str) -> str | None:
    """What makes ``data`` unfit to load for ``triple`` defining ``symbol``, or None.

    Never raises on bad ``data``: every parser error becomes the returned text.
    """
    want = expected_format(triple)
    if want is None:
        return f"objects for target {triple!r} are not ELF; they can not be checked"
    if not data.startswith(b"\x7fELF"):
        return "not an ELF file (bad magic)"
    lib = _elftools()
    try:
        return _problem(lib, lib.open(data), len(data), symbol, want)
    except lib.errors as exc:
        return f"malformed ELF ({type(exc).__name__}: {exc})"


def _header_problem(elf: Any, want: tuple[str, int, bool]) -> str | None:
    machine, elf_class, little = want
    if elf.elfclass != elf_class or elf.little_endian != little:
        order = "little" if elf.little_endian else "big"
        return f"ELF{elf.elfclass} {order}-endian, expected ELF{elf_class}"
    if elf["e_machine"] != machine:
        return f"machine {elf['e_machine']}, expected {machine}"
    if elf["e_type"] != "ET_REL":
        return f"type {elf['e_type']}, expected a relocatable object (ET_REL)"
    return None


def _problem(lib: Any, elf: Any, size: int, symbol: str,
             want: tuple[str, int, bool]) -> str | None:
    problem = _header_problem(elf, want)
    if problem is not None:
        return problem
    machine, elf_class, _ = want
    n_sections = elf.num_sections()
    if not 0 < n_sections <= 1 << 16:
        return f"{n_sections} sections"
    names = elf["e_shstrndx"]
    if not 0 < names < n_sections or elf.get_section(names)["sh_type"] != "SHT_STRTAB":
        return f"section names are in section {names}, which is not a string table"
    names_size = elf.get_section(names)["sh_size"]
    sections = [elf.get_section(i) for i in range(n_sections)]
    for index, section in enumerate(sections):  # one step per section (tens)
        problem = _section_problem(lib, section, index, size, n_sections, names_size)
        if problem is not None:
            return problem
    found: set[str] = set()
    for section in sections:
        if isinstance(section, lib.SymbolTableSection):
            problem = _symbols_problem(section, sections, symbol, elf_class, found)
            if problem is not None:
                return problem
        elif isinstance(section, lib.RelocationSection):
            problem = _relocations_problem(lib, section, sections, machine)
            if problem is not None:
                return problem
    if "code" not in found:
        return f"symbol {symbol!r} is not defined"
    if "abi" not in found:
        return f"symbol {symbol!r} has no ABI record ({ABI_RECORD_SIZE} bytes of data " \
               f"named {symbol + ABI_SUFFIX!r})"
    return None


_SHF_TLS = 0x400


def _section_problem(lib: Any, section: Any, index: int, size: int, n_sections: int,
                     names_size: int) -> str | None:
    header = section.header
    if header["sh_type"] != "SHT_NOBITS":
        start, length = header["sh_offset"], header["sh_size"]
        if start < 0 or length < 0 or start + length > size:
            return f"section {index} lies outside the file"
    if index and not 0 <= header["sh_name"] < names_size:
        return f"section {index}'s name lies outside the section name table"
    if not 0 <= header["sh_link"] < n_sections:
        return f"section {index} links to section {header['sh_link']}"
    align = header["sh_addralign"]
    if align < 0 or align & (align - 1):
        return f"section {index} has alignment {align}, not a power of two"
    if header["sh_flags"] & _SHF_TLS:
        return f"section {index} is thread-local storage (the JIT linker has none)"
    if isinstance(section, lib.StringTableSection) and header["sh_size"] and \
            not section.data().endswith(b"\x00"):
        return f"string table {index} is not NUL-terminated"
    return None


def _symbols_problem(table: Any, sections: list[Any], symbol: str, elf_class: int,
                     found: set[str]) -> str | None:
    """The problem with a symbol table, or None; adds ``"code"`` / ``"abi"`` to ``found``
    when it defines ``symbol`` / its ABI record."""
    entry_size = 24 if elf_class == 64 else 16
    if table.header["sh_entsize"] != entry_size:
        return f"symbol table entries of {table.header['sh_entsize']} bytes"
    names = sections[table.header["sh_link"]]
    if names.header["sh_type"] != "SHT_STRTAB":
        return "the symbol table's names are not in a string table"
    names_size, n_sections = names.header["sh_size"], len(sections)
    record = symbol + ABI_SUFFIX
    for k in range(table.num_symbols()):  # one step per symbol (a handful per kernel)
        sym = table.get_symbol(k)
        shndx = sym["st_shndx"]
        if isinstance(shndx, int) and not 0 <= shndx < n_sections:
            return f"symbol {k} names section {shndx}"
        if not 0 <= sym["st_name"] < max(names_size, 1):
            return f"symbol {k}'s name lies outside its string table"
        kind = sym["st_info"]["type"]
        if kind == "STT_TLS":
            return f"symbol {k} is thread-local (the JIT linker has no TLS)"
        if shndx == "SHN_UNDEF" or sym.name not in (symbol, record):
            continue
        if sym.name == symbol and kind == "STT_FUNC":
            found.add("code")
        elif sym.name == record and kind == "STT_OBJECT" and isinstance(shndx, int) \
                and sym["st_size"] == ABI_RECORD_SIZE:
            if sections[shndx].header["sh_size"] < sym["st_value"] + ABI_RECORD_SIZE:
                return f"{record!r} lies outside its section"
            found.add("abi")
    return None


#: Relocation types LLVM emits for JIT code (RuntimeDyldELF aborts on ones it lacks).
_RELOCATIONS = {"EM_X86_64": frozenset({1, 2, 3, 4, 9, 10, 11, 24, 25, 26, 41, 42})}


def _relocations_problem(lib: Any, section: Any, sections: list[Any],
                         machine: str) -> str | None:
    header = section.header
    if header["sh_entsize"] <= 0:
        return "relocation section with entry size 0"
    symtab = sections[header["sh_link"]]
    if not isinstance(symtab, lib.SymbolTableSection):
        return "relocation section without a symbol table"
    target_index = header["sh_info"]
    if not 0 < target_index < len(sections):
        return f"relocations for section {target_index}"
    target_size = sections[target_index].header["sh_size"]
    n_symbols = symtab.num_symbols()
    known = _RELOCATIONS.get(machine)
    for reloc in section.iter_relocations():  # one step per relocation
        if reloc["r_info_sym"] >= n_symbols or not 0 <= reloc["r_offset"] < target_size:
            return "a relocation points outside its symbol table or section"
        if known is not None and reloc["r_info_type"] not in known:
            return f"relocation type {reloc['r_info_type']} is not one LLVM emits here"
    return None


def object_check(symbol: str, triple: str) -> Callable[[bytes], str | None]:
    """``object_problem`` for ``symbol`` and ``triple``, as a ``DiskCache.get`` check."""
    return functools.partial(object_problem, symbol=symbol, triple=triple)


__all__ = ["ABI_RECORD_SIZE", "ABI_SUFFIX", "expected_format", "object_check", "object_problem"]
