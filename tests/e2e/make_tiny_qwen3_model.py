#!/usr/bin/env python3
"""Writes a tiny random-weight Qwen3 Hugging Face folder around Qwen's real tokenizer: config.json (width 64, two
layers, the 151,936 rows of Qwen3's embedding, tied to the output), model.safetensors (F16 pseudo-random weights
of magnitude 1/8 to 1/4, norms 1), and the given tokenizer.json and tokenizer_config.json (Qwen3's chat template
and special tokens). Its text is noise: whatever structure its output has, a constraint put there.

Usage: make_tiny_qwen3_model.py OUT_DIR tokenizer.json tokenizer_config.json [SEED]
"""
import json
import os
import random
import shutil
import struct
import sys

VOCAB, WIDTH, FF, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 151936, 64, 128, 2, 4, 2, 16


def random_f16(count, rng):
    """`count` float16 values with random signs and mantissas and the exponent of 1/8: |x| in [0.125, 0.25)."""
    bits = rng.getrandbits(16 * count)
    pattern_and = int.from_bytes(b"\xff\x83" * count, "little")  # keep the sign and the mantissa
    pattern_or = int.from_bytes(b"\x00\x30" * count, "little")   # exponent 01100: 2^-3
    return ((bits & pattern_and) | pattern_or).to_bytes(2 * count, "little")


def main():
    out, tokenizer, tokenizer_config = sys.argv[1], sys.argv[2], sys.argv[3]
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    os.makedirs(out, exist_ok=True)
    tensors = [("model.embed_tokens.weight", [VOCAB, WIDTH]), ("model.norm.weight", [WIDTH])]
    for layer in range(LAYERS):
        p = f"model.layers.{layer}."
        tensors += [
            (p + "input_layernorm.weight", [WIDTH]),
            (p + "post_attention_layernorm.weight", [WIDTH]),
            (p + "self_attn.q_proj.weight", [HEADS * HEAD_DIM, WIDTH]),
            (p + "self_attn.k_proj.weight", [KV_HEADS * HEAD_DIM, WIDTH]),
            (p + "self_attn.v_proj.weight", [KV_HEADS * HEAD_DIM, WIDTH]),
            (p + "self_attn.o_proj.weight", [WIDTH, HEADS * HEAD_DIM]),
            (p + "self_attn.q_norm.weight", [HEAD_DIM]),
            (p + "self_attn.k_norm.weight", [HEAD_DIM]),
            (p + "mlp.gate_proj.weight", [FF, WIDTH]),
            (p + "mlp.up_proj.weight", [FF, WIDTH]),
            (p + "mlp.down_proj.weight", [WIDTH, FF]),
        ]
    header, blobs, offset = {}, [], 0
    for name, shape in tensors:
        count = 1
        for d in shape:
            count *= d
        data = b"\x00\x3c" * count if name.endswith("norm.weight") else random_f16(count, rng)  # norms: 1.0
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)
    config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": WIDTH,
        "intermediate_size": FF, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "max_position_embeddings": 4096, "vocab_size": VOCAB, "tie_word_embeddings": True,
        "attention_bias": False, "torch_dtype": "float16", "bos_token_id": 151643, "eos_token_id": 151645,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    shutil.copyfile(tokenizer, os.path.join(out, "tokenizer.json"))
    shutil.copyfile(tokenizer_config, os.path.join(out, "tokenizer_config.json"))


if __name__ == "__main__":
    main()
