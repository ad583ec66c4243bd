#!/usr/bin/env python3
"""Writes a copy of a GGUF model whose output norm is NaN, so that every forward pass yields NaN logits.

Used by the fallback e2e test: the server must notice the non-finite logits and re-run the request on the
--fallback-model. Usage: make_nan_model.py IN.gguf OUT.gguf [tensor-name]
"""
import struct
import sys

SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    target = sys.argv[3] if len(sys.argv) > 3 else "output_norm.weight"
    data = bytearray(open(src, "rb").read())
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals[0] if len(vals) == 1 else vals

    def string():
        nonlocal pos
        n = take("Q")
        s = bytes(data[pos:pos + n]).decode("utf-8", "replace")
        pos += n
        return s

    def skip_value(t):
        nonlocal pos
        if t == 8:
            string()
        elif t == 9:
            et, n = take("I"), take("Q")
            for _ in range(n):
                skip_value(et)
        else:
            pos += SCALAR_SIZES[t]

    assert data[:4] == b"GGUF", "not a GGUF file"
    pos = 4
    take("I")  # version
    n_tensors, n_kv = take("Q"), take("Q")
    alignment = 32
    for _ in range(n_kv):
        key, t = string(), take("I")
        if key == "general.alignment" and t == 4:
            alignment = take("I")
        else:
            skip_value(t)
    found = None
    for _ in range(n_tensors):
        name = string()
        n_dims = take("I")
        dims = [take("Q") for _ in range(n_dims)]
        ttype, offset = take("I"), take("Q")
        if name == target:
            found = (dims, ttype, offset)
    assert found, f"no tensor {target}"
    dims, ttype, offset = found
    assert ttype == 0, f"{target} is not F32"
    base = (pos + alignment - 1) // alignment * alignment + offset
    n = 1
    for d in dims:
        n *= d
    nan = struct.pack("<f", float("nan"))
    for i in range(n):
        data[base + 4 * i: base + 4 * i + 4] = nan
    open(dst, "wb").write(bytes(data))


if __name__ == "__main__":
    main()
