#!/usr/bin/env python3
"""Write a tiny random-weight llama-architecture GGUF model.

The tokenizer (vocabulary, scores, token types, special ids) is copied from a
llama.cpp vocab-only GGUF (``models/ggml-vocab-llama-spm.gguf`` in the
llama.cpp tree), so the model tokenizes text like a real LLaMA-1/2 model.
The weights are random (fixed seed, legacy ``numpy.random.RandomState``, whose
stream is guaranteed stable across numpy versions), so the file is byte-for-byte
reproducible for a given gguf-py version.

Shape: n_embd 256, 2 layers, 4 heads (head dim 64), n_ff 512, context 2048.
Every 2-D weight has a row size that is a multiple of 256, so K-quants
(Q4_K_M) apply to all of them without fallbacks.

Usage:
    make_tiny_model.py --vocab ggml-vocab-llama-spm.gguf --out tiny-llama-f16.gguf \
        [--gguf-py DIR] [--outtype f16|f32] [--seed N]

gguf-py is imported from --gguf-py (or $GGUF_PY_DIR) when given, so that the
writer matches the vendored llama.cpp; otherwise from the installed ``gguf``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

N_EMBD = 256
N_LAYER = 2
N_HEAD = 4
N_HEAD_KV = 4
N_FF = 512
N_CTX = 2048
RMS_EPS = 1e-5
ROPE_THETA = 10000.0
INIT_STD = 0.02


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", required=True, type=Path, help="vocab-only GGUF to copy the tokenizer from")
    p.add_argument("--out", required=True, type=Path, help="output GGUF path")
    p.add_argument("--gguf-py", type=Path, default=os.environ.get("GGUF_PY_DIR"),
                   help="directory containing the gguf package (llama.cpp's gguf-py)")
    p.add_argument("--outtype", choices=("f16", "f32"), default="f16",
                   help="storage type of the 2-D weights (1-D norms are always f32)")
    p.add_argument("--seed", type=int, default=20240229)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if args.gguf_py:
        sys.path.insert(0, str(args.gguf_py))
    import numpy as np  # noqa: E402
    import gguf  # noqa: E402

    reader = gguf.GGUFReader(str(args.vocab))
    tok_fields = {k: f for k, f in reader.fields.items() if k.startswith("tokenizer.")}
    if "tokenizer.ggml.tokens" not in tok_fields:
        print(f"error: {args.vocab} has no tokenizer.ggml.tokens", file=sys.stderr)
        return 1
    n_vocab = len(tok_fields["tokenizer.ggml.tokens"].data)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = args.out.with_name(args.out.name + ".tmp")
    arch = "llama"
    w = gguf.GGUFWriter(str(tmp_out), arch)

    # --- hyper-parameters -------------------------------------------------
    w.add_name("capshim-tiny-llama")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_rope_freq_base(ROPE_THETA)
    w.add_vocab_size(n_vocab)
    ftype = gguf.LlamaFileType.MOSTLY_F16 if args.outtype == "f16" else gguf.LlamaFileType.ALL_F32
    w.add_file_type(ftype)

    # --- tokenizer: copy every tokenizer.* key verbatim ----------------------
    for key, field in tok_fields.items():
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            w.add_key_value(key, field.contents(), vtype, sub_type=sub)
        else:
            w.add_key_value(key, field.contents(), vtype)

    # --- tensors -------------------------------------------------------------
    rng = np.random.RandomState(args.seed)
    wdtype = np.float16 if args.outtype == "f16" else np.float32

    def mat(rows: int, cols: int) -> "np.ndarray":
        # numpy shape (rows, cols) == GGUF ne = [cols, rows]; cols is the row size
        return (rng.standard_normal((rows, cols)) * INIT_STD).astype(wdtype)

    def ones(n: int) -> "np.ndarray":
        return np.ones((n,), dtype=np.float32)

    head_dim = N_EMBD // N_HEAD
    n_embd_kv = head_dim * N_HEAD_KV
    w.add_tensor("token_embd.weight", mat(n_vocab, N_EMBD))
    for i in range(N_LAYER):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", ones(N_EMBD))
        w.add_tensor(b + "attn_q.weight", mat(N_EMBD, N_EMBD))
        w.add_tensor(b + "attn_k.weight", mat(n_embd_kv, N_EMBD))
        w.add_tensor(b + "attn_v.weight", mat(n_embd_kv, N_EMBD))
        w.add_tensor(b + "attn_output.weight", mat(N_EMBD, N_EMBD))
        w.add_tensor(b + "ffn_norm.weight", ones(N_EMBD))
        w.add_tensor(b + "ffn_gate.weight", mat(N_FF, N_EMBD))
        w.add_tensor(b + "ffn_up.weight", mat(N_FF, N_EMBD))
        w.add_tensor(b + "ffn_down.weight", mat(N_EMBD, N_FF))
    w.add_tensor("output_norm.weight", ones(N_EMBD))
    w.add_tensor("output.weight", mat(n_vocab, N_EMBD))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp_out, args.out)
    print(f"wrote {args.out} (vocab {n_vocab}, n_embd {N_EMBD}, layers {N_LAYER}, "
          f"heads {N_HEAD}, n_ff {N_FF}, ctx {N_CTX}, {args.outtype})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
