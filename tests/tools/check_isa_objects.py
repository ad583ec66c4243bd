#!/usr/bin/env python3
"""Checks that no code compiled for AVX2 or AVX-512 can be reached without the run-time dispatch.

Files named *_avx2.cpp / *_avx512.cpp / *_amx.cpp are compiled with that ISA's flags. Their own functions live in an
`avx2` / `avx512` / `amx` namespace (or an anonymous one) and are only called once cpu_features says the machine has the
ISA. But such a file also emits out-of-line copies of inline functions and templates from the headers it includes
(std::vector<float>::_M_default_append, an inline helper of ours): symbols of vague linkage (weak, or unique
global), of which the linker keeps one copy for the whole program, whichever object it meets first. If that copy
came from an AVX-512 object and holds AVX-512 instructions, every call from ordinary code runs them, and an
AVX2-only machine dies of SIGILL, depending only on link order.

So: in an object of ISA X, every weak or unique function, together with the local functions it reaches by calls,
jumps or address references, must hold only baseline x86-64 instructions, unless its name lies in X's own
namespace (`::avx512::` in an *_avx512 object), which only dispatched code names.

Usage: check_isa_objects.py OBJDUMP OBJECT|@LISTFILE... (a list file names one object per line; objects not named
*_avx2.cpp.o / *_avx512.cpp.o are skipped)
Exit status 0 when clean, 1 with a list of offending functions, 2 on a usage error or when no ISA object was given.
"""
import bisect
import re
import subprocess
import sys

ISA_OBJECT = re.compile(r"_(avx2|avx512|amx)\.cpp\.o(bj)?$")
SYMBOL = re.compile(r"^([0-9a-f]+) (.{7}) (\S+)\t([0-9a-f]+) (.*)$")
LABEL = re.compile(r"^([0-9a-f]+) <(.*)>:$")
SECTION = re.compile(r"^Disassembly of section (\S+):$")
INSN = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*\t(.*)$")
RELOC = re.compile(r"R_X86_64_\w+\t(.+)$")
SECTION_TARGET = re.compile(r"^(\.[\w.$]+?)(?:([+-])0x([0-9a-f]+))?$")
BRANCH = re.compile(r"^(call|jmp|j[a-z]{1,3})\s+([0-9a-f]+) <")

LEGACY_PREFIXES = {0x26, 0x2E, 0x36, 0x3E, 0x64, 0x65, 0x66, 0x67, 0xF0, 0xF2, 0xF3}
# Legacy-encoded instructions beyond x86-64's SSE2 baseline that compilers emit for scalar code under ISA flags.
# (tzcnt is not here: GCC emits `rep bsf`, which objdump shows as tzcnt, for baseline code on purpose.)
BEYOND_BASELINE_MNEMONICS = {"popcnt", "lzcnt", "movbe", "crc32", "adcx", "adox"}


def beyond_baseline(raw_bytes, text):
    """Why the instruction needs more than baseline x86-64, or None."""
    mnemonic = text.split()[0] if text.split() else ""
    if mnemonic in BEYOND_BASELINE_MNEMONICS:
        return mnemonic
    i = 0
    while i < len(raw_bytes) and raw_bytes[i] in LEGACY_PREFIXES:
        i += 1
    if i < len(raw_bytes) and 0x40 <= raw_bytes[i] <= 0x4F:  # REX
        i += 1
    if i >= len(raw_bytes):
        return None
    # In 64-bit mode 0xC4/0xC5 can only start a VEX prefix (AVX, AVX2, FMA, F16C, BMI) and 0x62 an EVEX one
    # (AVX-512): LES, LDS and BOUND do not exist there.
    if raw_bytes[i] in (0xC4, 0xC5):
        return "VEX"
    if raw_bytes[i] == 0x62:
        return "EVEX"
    # Three-byte legacy opcodes 0F 38 / 0F 3A: SSSE3, SSE4.1/4.2 (and movbe, crc32, adcx), none in SSE2.
    if raw_bytes[i] == 0x0F and i + 1 < len(raw_bytes) and raw_bytes[i + 1] in (0x38, 0x3A):
        return "SSSE3/SSE4"
    return None


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


class Function:
    def __init__(self, section, start, name):
        self.section, self.start, self.name = section, start, name
        self.findings = []  # (address, reason, instruction text)
        self.refs = []  # ("name", symbol) or ("at", section, offset)


def parse_object(objdump, path):
    """The object's functions with their instructions' findings and references, and its symbol table."""
    symbols = []  # (binding flags, section, value, name) of function symbols
    for line in run(objdump, "-t", "-w", "-C", path).splitlines():
        m = SYMBOL.match(line)
        if m and m.group(2)[6] == "F":
            symbols.append((m.group(2), m.group(3), int(m.group(1), 16), m.group(5)))

    functions, section, current = {}, None, None
    for line in run(objdump, "-d", "-w", "-r", "-C", path).splitlines():
        m = SECTION.match(line)
        if m:
            section, current = m.group(1), None
            continue
        m = LABEL.match(line)
        if m:
            current = Function(section, int(m.group(1), 16), m.group(2))
            functions[(section, current.start)] = current
            continue
        m = INSN.match(line)
        if not m or current is None:
            continue
        address, raw, rest = int(m.group(1), 16), m.group(2), m.group(3)
        text, _, tail = rest.partition("\t")
        reason = beyond_baseline(bytes.fromhex(raw.replace(" ", "")), text)
        if reason:
            current.findings.append((address, reason, text.strip()))
        reloc = RELOC.search(tail)
        if reloc:
            target = reloc.group(1).strip()
            t = SECTION_TARGET.match(target)
            if t:
                # PC-relative displacements sit 4 bytes before the instruction's end, so the addend is target - 4.
                addend = int(t.group(3) or "0", 16) * (-1 if t.group(2) == "-" else 1)
                current.refs.append(("at", t.group(1), addend + 4))
            else:
                current.refs.append(("name", re.sub(r"[+-]0x[0-9a-f]+$", "", target)))
        else:
            b = BRANCH.match(text.strip())
            if b:
                current.refs.append(("at", section, int(b.group(2), 16)))
    return functions, symbols


def check_object(objdump, path, isa):
    functions, symbols = parse_object(objdump, path)
    starts = {}
    for sec, start in functions:
        starts.setdefault(sec, []).append(start)
    for lst in starts.values():
        lst.sort()
    local_by_name = {}
    for flags, sec, value, name in symbols:
        if flags[0] == "l":
            local_by_name.setdefault(name, []).append((sec, value))

    def containing(sec, offset):
        lst = starts.get(sec)
        if not lst:
            return None
        i = bisect.bisect_right(lst, offset) - 1
        return functions.get((sec, lst[i])) if i >= 0 else None

    vague = [(sec, value, name) for flags, sec, value, name in symbols if flags[0] == "u" or flags[1] == "w"]
    violations = []
    for sec, value, name in vague:
        if f"::{isa}::" in name:
            continue
        root = functions.get((sec, value))
        if root is None:
            continue
        seen, todo, found = {id(root)}, [root], []
        while todo:
            fn = todo.pop()
            found += [(fn, f) for f in fn.findings]
            for ref in fn.refs:
                targets = []
                if ref[0] == "at":
                    targets.append(containing(ref[1], ref[2]))
                else:
                    targets += [containing(s, v) for s, v in local_by_name.get(ref[1], [])]
                for t in targets:
                    if t is not None and id(t) not in seen:
                        seen.add(id(t))
                        todo.append(t)
        if found:
            violations.append((name, found))
    return len(vague), violations


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    objdump, objects = sys.argv[1], []
    for arg in sys.argv[2:]:
        if arg.startswith("@"):
            with open(arg[1:]) as f:
                objects += [line.strip() for line in f if line.strip()]
        else:
            objects.append(arg)
    checked, failed, vague_total = 0, 0, 0
    for path in objects:
        m = ISA_OBJECT.search(path)
        if not m:
            continue
        checked += 1
        vague, violations = check_object(objdump, path, m.group(1))
        vague_total += vague
        for name, found in violations:
            failed += 1
            print(f"{path}: `{name}` has vague linkage, lies outside namespace {m.group(1)}, and the copy this "
                  f"object emits needs more than baseline x86-64; the linker may pick it for ordinary callers:")
            for fn, (address, reason, text) in found[:5]:
                print(f"    {reason} in {fn.name} at {fn.section}+{address:#x}: {text}")
            if len(found) > 5:
                print(f"    ... {len(found) - 5} more")
    if checked == 0:
        print("no *_avx2.cpp.o / *_avx512.cpp.o object among the arguments: nothing was checked", file=sys.stderr)
        return 2
    print(f"{checked} ISA-specific objects, {vague_total} weak or unique functions in them, {failed} that would "
          f"put ISA code behind ordinary callers")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
