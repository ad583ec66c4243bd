#!/usr/bin/env python3
"""Writes a tiny Llama Hugging Face folder around a real tokenizer: config.json, model.safetensors (F16, one
layer of width 64, embedding tied to the output, fixed pseudo-random weights), and the given tokenizer.json and
tokenizer_config.json. The weights make no sense; the point is the vocabulary: with Llama 3's, a server faces a
real set of special tokens (256 of them, all starting with "<|") at the size of a test.

Usage: make_tiny_hf_model.py OUT_DIR tokenizer.json [tokenizer_config.json]
"""
import json
import os
import shutil
import struct
import sys

WIDTH, FF, HEADS, KV_HEADS = 64, 128, 4, 2


def f16_rows(n_rows, n_cols, seed):
    """n_rows x n_cols float16 bytes: 61 distinct pseudo-random rows, repeated (cheap for a 128k vocabulary)."""
    rows = []
    x = seed
    for _ in range(61):
        values = []
        for _ in range(n_cols):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
            values.append((x / 0x7FFFFFFF - 0.5) * 0.2)
        rows.append(struct.pack(f"<{n_cols}e", *values))
    return b"".join(rows[i % 61] for i in range(n_rows))


def ones(n):
    return struct.pack(f"<{n}e", *([1.0] * n))


def main():
    out, tokenizer = sys.argv[1], sys.argv[2]
    config_src = sys.argv[3] if len(sys.argv) > 3 else None
    tok = json.load(open(tokenizer, encoding="utf-8"))
    n_vocab = max(max(tok["model"]["vocab"].values()), max((t["id"] for t in tok.get("added_tokens", [])), default=0)) + 1
    head_dim = WIDTH // HEADS
    tensors = [("model.embed_tokens.weight", [n_vocab, WIDTH], f16_rows(n_vocab, WIDTH, 1)),
               ("model.layers.0.input_layernorm.weight", [WIDTH], ones(WIDTH)),
               ("model.layers.0.self_attn.q_proj.weight", [HEADS * head_dim, WIDTH], f16_rows(HEADS * head_dim, WIDTH, 2)),
               ("model.layers.0.self_attn.k_proj.weight", [KV_HEADS * head_dim, WIDTH], f16_rows(KV_HEADS * head_dim, WIDTH, 3)),
               ("model.layers.0.self_attn.v_proj.weight", [KV_HEADS * head_dim, WIDTH], f16_rows(KV_HEADS * head_dim, WIDTH, 4)),
               ("model.layers.0.self_attn.o_proj.weight", [WIDTH, HEADS * head_dim], f16_rows(WIDTH, HEADS * head_dim, 5)),
               ("model.layers.0.post_attention_layernorm.weight", [WIDTH], ones(WIDTH)),
               ("model.layers.0.mlp.gate_proj.weight", [FF, WIDTH], f16_rows(FF, WIDTH, 6)),
               ("model.layers.0.mlp.up_proj.weight", [FF, WIDTH], f16_rows(FF, WIDTH, 7)),
               ("model.layers.0.mlp.down_proj.weight", [WIDTH, FF], f16_rows(WIDTH, FF, 8)),
               ("model.norm.weight", [WIDTH], ones(WIDTH))]
    header, offset = {}, 0
    for name, shape, data in tensors:
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header_bytes = json.dumps(header).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)) + header_bytes)
        for _, _, data in tensors:
            f.write(data)
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": WIDTH, "num_hidden_layers": 1,
              "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "intermediate_size": FF,
              "vocab_size": n_vocab, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
              "tie_word_embeddings": True, "torch_dtype": "float16", "hidden_act": "silu"}
    json.dump(config, open(os.path.join(out, "config.json"), "w"))
    shutil.copy(tokenizer, os.path.join(out, "tokenizer.json"))
    if config_src:
        shutil.copy(config_src, os.path.join(out, "tokenizer_config.json"))


if __name__ == "__main__":
    main()
