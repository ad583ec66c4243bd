#!/usr/bin/env python3
"""Writes a copy of a GGUF model with NaN in one F32 tensor, for the fallback and readiness e2e tests.

  make_nan_model.py IN.gguf OUT.gguf
      the output norm is NaN: every forward pass yields NaN logits (a broken engine).
  make_nan_model.py IN.gguf OUT.gguf --poison-token ID
      the embedding row of token ID is NaN, and the output projection (tied to the embedding in the embedded
      model) becomes a separate, intact copy: only a request holding that token gets NaN logits; the engine
      itself stays healthy.
"""
import struct
import sys

SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
NAN = struct.pack("<f", float("nan"))


def parse(data):
    """The tensor table: (header end, tensor-info start, alignment, [(name, dims, type, offset)])."""
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
    infos_start = pos
    tensors = []
    for _ in range(n_tensors):
        name = string()
        n_dims = take("I")
        dims = [take("Q") for _ in range(n_dims)]
        tensors.append((name, dims, take("I"), take("Q")))
    return pos, infos_start, alignment, tensors


def align(n, a):
    return (n + a - 1) // a * a


def f32_tensor(tensors, name):
    for t in tensors:
        if t[0] == name:
            assert t[2] == 0, f"{name} is not F32"
            return t
    raise AssertionError(f"no tensor {name}")


def fill_nan(data, base, first, count):
    for i in range(first, first + count):
        data[base + 4 * i: base + 4 * i + 4] = NAN


def nan_output_norm(data):
    end, _, alignment, tensors = parse(data)
    _, dims, _, offset = f32_tensor(tensors, "output_norm.weight")
    fill_nan(data, align(end, alignment) + offset, 0, dims[0])
    return data


def poison_token(data, token):
    end, infos_start, alignment, tensors = parse(data)
    assert not any(t[0] == "output.weight" for t in tensors), "the model already has an output.weight"
    _, dims, _, offset = f32_tensor(tensors, "token_embd.weight")
    row, n_rows = dims[0], dims[1]
    assert 0 <= token < n_rows
    data_start = align(end, alignment)
    embd = bytes(data[data_start + offset: data_start + offset + 4 * row * n_rows])
    tensor_data = bytearray(data[data_start:])
    # output.weight: an intact copy of the embedding, appended at the end of the data section.
    new_offset = align(len(tensor_data), alignment)
    tensor_data += bytes(new_offset - len(tensor_data)) + embd
    fill_nan(tensor_data, offset, token * row, row)
    name = b"output.weight"
    info = struct.pack("<Q", len(name)) + name + struct.pack("<I", 2) + struct.pack("<QQ", row, n_rows)
    info += struct.pack("<IQ", 0, new_offset)
    header = bytearray(data[:end]) + info
    struct.pack_into("<Q", header, 8, len(tensors) + 1)  # tensor count, after magic and version
    header += bytes(align(len(header), alignment) - len(header))
    assert infos_start < end
    return header + tensor_data


def main():
    src, dst = sys.argv[1], sys.argv[2]
    data = bytearray(open(src, "rb").read())
    if len(sys.argv) > 4 and sys.argv[3] == "--poison-token":
        data = poison_token(data, int(sys.argv[4]))
    else:
        data = nan_output_norm(data)
    open(dst, "wb").write(bytes(data))


if __name__ == "__main__":
    main()
