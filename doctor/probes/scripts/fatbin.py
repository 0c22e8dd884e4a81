"""Which GPU architectures a shared library carries code for, from its CUDA fat binaries.

Standard library only (Python >= 3.8): this file runs inside the target interpreter, as a library
or as ``python fatbin.py LIB...`` (prints JSON). Nothing is imported from torch/CUDA and nothing is
decompressed: only the ELF section table and the fatbin (entry) headers are read, with seek, so a
900 MB libtorch_cuda.so costs its section table and 2,359 reads of 64 bytes (about 5 ms warm).

Layout (little-endian), as read here:

ELF: the section header table (e_shoff, e_shentsize, e_shnum, e_shstrndx) names the sections;
the fat binaries live in ``.nv_fatbin`` (FATBIN_DATA_SECTION_NAME), relocatable ones for a later
device link in ``__nv_relfatbin`` (FATBIN_PRELINK_DATA_SECTION_NAME) -- both names from NVIDIA's
``fatbinary_section.h`` (shipped in triton/backends/nvidia/include/). ``.nvFatBinSegment`` only
holds the 24-byte ``__fatBinC_Wrapper_t`` pointers (magic 0x466243B1) and is not read. ``.nv.fatbin``
is accepted as an alias.

A section holds one or more fat binaries back to back (one per translation unit / device link),
each 8-byte aligned:

    fatBinaryHeader (16 bytes)        u32 magic 0xBA55ED50, u16 version 1, u16 headerSize (16),
                                      u64 fatSize (bytes of entries after this header)
    then entries until headerSize + fatSize:
    entry header (header_size bytes: 64, 72, 80, 96, 112 seen -- always read the field)
        +0  u16 kind        1 = PTX, 2 = ELF (cubin), 8 = NVVM IR (FATBIN_KIND_* in fatbinary.h)
        +2  u16 version     0x0101
        +4  u32 header_size this entry header's size; the payload follows it
        +8  u64 payload size as stored (padded); next entry = entry + header_size + this
        +16 u32 compressed payload size (0: not compressed)
        +24 u16 minor, +26 u16 major of the code version ([1,7] for cubins; the PTX ISA for PTX)
        +28 u32 sm_arch     e.g. 80, 90 (for PTX: the virtual arch, compute_90 -> 90)
        +32 u32 obj name offset, +36 u32 obj name length
        +40 u64 flags       0x1 64-bit, 0x2 debug, 0x10 linux, 0x2000 LZ4, 0x8000 ZSTD compressed,
                            0x100000 arch-specific ("sm_90a"), 0x200000 family-specific
                            ("sm_100f"), 0x1000000 set on sm_100+ cubins of nvcc 13 (meaning
                            unknown, ignored). The a/f bits are not in the sources below: they
                            were found by comparing vllm's entries with cuobjdump 12.4's
                            --list-elf names (25 sm_90a) and nvcc 13.0 builds of
                            sm_90/90a/100/100a/100f/103f/120a and compute_100a/100f.
        +56 u64 uncompressed payload size (0: not compressed)
    The payload may be compressed; the arch field is in the uncompressed entry header, so it is
    read without decompressing.

Sources (they agree on the offsets used here: magic/version/headerSize/fatSize, kind@0,
header_size@4, padded size@8, sm_arch@28, flags@40):
  - NVIDIA fatbinary.h (``struct fatBinaryHeader``, ``fatBinaryCodeKind``), as quoted in
    vosen/ZLUDA and other public code (search corpus "fatbinary_ALIGN_(8) fatBinaryHeader").
  - NVIDIA fatbinary_section.h (section names, FATBINC_MAGIC), CUDA 12.4 copy in triton 3.0's wheel.
  - vosen/ZLUDA dark_api/src/fatbin.rs and cuda_types/src/dark_api.rs (``FatbinHeader``,
    ``FatbinFileHeader``: kind, version 0x101, header_size, padded_payload_size, payload_size,
    sm_version, flags with CompressedLz4 0x2000 / CompressedZstd 0x8000, uncompressed_payload).
  - n-eiling/cuda-fatbin-decompression fatbin-decompress.h (``fat_elf_header``,
    ``fat_text_header``: kind, header_size, fatbin_size u64, compressed_size, minor, major, arch,
    obj_name_offset, obj_name_len, flags@40, decompressed_size@56).
  - GrigoryEvko/nvopen-tools fatbin/FORMAT_SPECIFICATION.md (several containers per section,
    entry headers of 64/80/112 bytes for newer archs, next = entry + size + padded size).
Checked against cuobjdump 12.4 (--list-elf / --list-ptx, arch sets and entry counts) on every
library of torch 2.4.0, vllm 0.6.3.post1 and xformers 0.0.27.post2 (tests/probes/test_fatbin.py),
against cuobjdump 12.8 on torch 2.11.0+cu130 (tests/data/gpu/README.md), and on nvcc 13.0 builds
(tests/data/fatbin/).
"""

import json
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
FATBIN_SECTIONS = (".nv_fatbin", ".nv.fatbin", "__nv_relfatbin")
KIND_PTX = 1
KIND_ELF = 2
FLAG_ARCH_SPECIFIC = 0x100000  # sm_90a, sm_100a: runs on exactly that compute capability
FLAG_FAMILY_SPECIFIC = 0x200000  # sm_100f, sm_103f (CUDA >= 12.9): runs on that family
_ENTRY_MIN = 32  # bytes of an entry header read: kind .. sm_arch
_MAX_ENTRIES = 2_000_000  # a guard against a corrupt section sending the walk into a loop


class FatbinError(Exception):
    pass


def _sections(f):
    """{name: (file offset, size)} of the ELF's sections, from its section header table."""
    ident = f.read(16)
    if len(ident) < 16 or ident[:4] != b"\x7fELF":
        raise FatbinError("not an ELF file")
    cls, data = ident[4], ident[5]
    if data != 1:
        raise FatbinError("big-endian ELF is not supported")
    if cls == 2:
        hdr = f.read(48)
        if len(hdr) < 48:
            raise FatbinError("truncated ELF header")
        shoff, = struct.unpack_from("<Q", hdr, 24)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", hdr, 42)
        fmt, name_at, off_at, size_at = "<IIQQQQIIQQ", 0, 4, 5
    elif cls == 1:
        hdr = f.read(36)
        if len(hdr) < 36:
            raise FatbinError("truncated ELF header")
        shoff, = struct.unpack_from("<I", hdr, 16)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", hdr, 30)
        fmt, name_at, off_at, size_at = "<IIIIIIIIII", 0, 4, 5
    else:
        raise FatbinError("unknown ELF class %d" % cls)
    if shoff == 0:
        raise FatbinError("ELF has no section header table")
    need = struct.calcsize(fmt)
    if shentsize < need:
        raise FatbinError("bad ELF section header size %d" % shentsize)
    f.seek(shoff)
    first = f.read(shentsize)
    if len(first) < need:
        raise FatbinError("truncated ELF section header table")
    s0 = struct.unpack_from(fmt, first)
    if shnum == 0:  # more than 0xff00 sections: the count is in section 0's sh_size
        shnum = s0[size_at]
    if shstrndx == 0xFFFF:  # SHN_XINDEX: the index is in section 0's sh_link
        shstrndx = s0[6]
    table = first + f.read(shentsize * (shnum - 1))
    if len(table) < shentsize * shnum:
        raise FatbinError("truncated ELF section header table")
    heads = [struct.unpack_from(fmt, table, i * shentsize) for i in range(shnum)]
    if not 0 <= shstrndx < shnum:
        raise FatbinError("bad ELF section name table index")
    strtab = heads[shstrndx]
    f.seek(strtab[off_at])
    names = f.read(strtab[size_at])
    out = {}
    for h in heads:
        start = h[name_at]
        end = names.find(b"\0", start)
        name = names[start:end if end >= 0 else None].decode("latin-1")
        if h[1] != 8:  # SHT_NOBITS has no bytes in the file
            out.setdefault(name, (h[off_at], h[size_at]))
    return out


def entries(path):
    """Every fatbin entry header of PATH's fatbin sections: dicts with section, offset, kind,
    arch, flags, header_size, size. Raises FatbinError on a file it cannot read as ELF."""
    with open(path, "rb", buffering=0) as f:
        secs = _sections(f)
        for name in FATBIN_SECTIONS:
            if name in secs:
                for e in _walk(f, name, *secs[name]):
                    yield e


def _walk(f, section, start, size):
    end = start + size
    pos = start
    count = 0
    while pos + 16 <= end:
        f.seek(pos)
        hdr = f.read(16)
        magic, version, hsize, fatsize = struct.unpack("<IHHQ", hdr)
        if magic != FATBIN_MAGIC:
            # Padding between fat binaries: look for the next magic at an 8-byte boundary.
            nxt = _find_magic(f, pos + 8, end)
            if nxt is None:
                return
            pos = nxt
            continue
        if hsize < 16 or pos + hsize + fatsize > end:
            raise FatbinError("%s: fatbin at 0x%x claims %d bytes past the section end"
                              % (section, pos, pos + hsize + fatsize - end))
        epos = pos + hsize
        cend = epos + fatsize
        while epos + _ENTRY_MIN <= cend:
            f.seek(epos)
            eh = f.read(64)
            kind, _ver, ehsize, psize = struct.unpack_from("<HHIQ", eh, 0)
            arch, = struct.unpack_from("<I", eh, 28)
            flags = struct.unpack_from("<Q", eh, 40)[0] if len(eh) >= 48 else 0
            if ehsize < _ENTRY_MIN:
                raise FatbinError("%s: entry at 0x%x has header size %d" % (section, epos, ehsize))
            yield {"section": section, "offset": epos, "kind": kind, "arch": arch,
                   "flags": flags, "header_size": ehsize, "size": psize}
            count += 1
            if count > _MAX_ENTRIES:
                raise FatbinError("%s: more than %d entries" % (section, _MAX_ENTRIES))
            epos += ehsize + psize
        pos = (cend + 7) & ~7


def _find_magic(f, pos, end):
    pos = (pos + 7) & ~7
    magic = struct.pack("<I", FATBIN_MAGIC)
    while pos < end:
        f.seek(pos)
        chunk = f.read(min(1 << 16, end - pos))
        if not chunk:
            return None
        i = chunk.find(magic)
        while i >= 0 and (pos + i) % 8:
            i = chunk.find(magic, i + 1)
        if i >= 0:
            return pos + i
        pos += max(8, (len(chunk) - 3) & ~7)
    return None


def _name(e):
    """cuobjdump's name of an entry: sm_90, sm_90a, sm_100f, compute_90 (PTX)."""
    suffix = "a" if e["flags"] & FLAG_ARCH_SPECIFIC else "f" if e["flags"] & FLAG_FAMILY_SPECIFIC else ""
    return "%s_%d%s" % ("sm" if e["kind"] == KIND_ELF else "compute", e["arch"], suffix)


def archs(path):
    """What PATH carries GPU code for:

    {"sm": [int], "ptx": [int], "variants": [str], "entries": int, "relocatable": None or
     {"sm", "ptx", "variants", "entries"}, "error": None or str}

    "sm": compute capabilities with a cubin in the executable fatbin (``.nv_fatbin``), e.g. 80, 90;
    "ptx": virtual archs with PTX there (compute_90 -> 90); "variants": the arch-specific and
    family-specific ones by name ("sm_90a", "sm_100f", "compute_100a"), whose arch is also in
    "sm"/"ptx" (sm_90a is code for compute capability 9.0 only; sm_100f for the 10.x family).
    "relocatable": the same for ``__nv_relfatbin`` when the library has one: relocatable device
    code kept for a later device link, which the CUDA runtime does not load for a launch
    (cuobjdump lists it only with --all-fatbin); None when there is no such section.
    A library without fatbin sections gives empty lists and error None (a CPU-only library is a
    fact); a file that cannot be read as ELF, or a corrupt fatbin, gives an error string (and what
    was read before it)."""
    found = {}
    error = None
    try:
        for e in entries(path):
            rel = e["section"] == "__nv_relfatbin"
            d = found.setdefault(rel, {"sm": set(), "ptx": set(), "variants": set(), "entries": 0})
            d["entries"] += 1
            if e["kind"] == KIND_ELF:
                d["sm"].add(e["arch"])
            elif e["kind"] == KIND_PTX:
                d["ptx"].add(e["arch"])
            else:
                continue
            if e["flags"] & (FLAG_ARCH_SPECIFIC | FLAG_FAMILY_SPECIFIC):
                d["variants"].add((e["arch"], _name(e)))
    except (OSError, FatbinError, struct.error) as exc:
        error = "%s: %s" % (type(exc).__name__, exc)

    def out(d):
        return {"sm": sorted(d["sm"]), "ptx": sorted(d["ptx"]),
                "variants": [n for _, n in sorted(d["variants"])], "entries": d["entries"]}

    res = out(found.get(False) or {"sm": (), "ptx": (), "variants": (), "entries": 0})
    res["relocatable"] = out(found[True]) if True in found else None
    res["error"] = error
    return res


def needed(path):
    """The DT_NEEDED entries of PATH's dynamic section (the sonames the loader will look for:
    libcudart.so.12 says the library was built with CUDA 12), in order; [] when it has none."""
    with open(path, "rb", buffering=0) as f:
        secs = _sections(f)
        f.seek(4)
        cls = f.read(1)[0]
        if ".dynamic" not in secs or ".dynstr" not in secs:
            return []
        off, size = secs[".dynamic"]
        f.seek(off)
        dyn = f.read(size)
        off, size = secs[".dynstr"]
        f.seek(off)
        strs = f.read(size)
    fmt = "<qQ" if cls == 2 else "<iI"
    step = struct.calcsize(fmt)
    out = []
    for i in range(0, len(dyn) - step + 1, step):
        tag, val = struct.unpack_from(fmt, dyn, i)
        if tag == 0:  # DT_NULL ends the table
            break
        if tag == 1 and val < len(strs):  # DT_NEEDED: an offset into .dynstr
            end = strs.find(b"\0", val)
            out.append(strs[val:end if end >= 0 else None].decode("latin-1"))
    return out


def scan(paths):
    """{path: archs(path)} for each of PATHS (a path as given, in order)."""
    return {str(p): archs(p) for p in paths}


if __name__ == "__main__" and sys.argv[0].endswith("fatbin.py"):  # not when prepended to a probe
    json.dump(scan(sys.argv[1:]), sys.stdout, indent=1)
    sys.stdout.write("\n")
