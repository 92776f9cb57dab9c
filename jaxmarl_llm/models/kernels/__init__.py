"""Attention kernels behind models/attention.py's backend switch.

    flash_attention.py    prefill / training: Pallas (Triton-style) forward + dq + dk/dv kernels, GQA, per-row
                          query positions
    decode_attention.py   a few new queries per row against a KV cache: split-K Pallas kernel
    pallas_attention.py   the "pallas" backend: picks the forward kernel, custom_vjp over the backward kernels
    tpu_attention.py      "pallas" on TPU: JAX's shipped Mosaic flash attention, whole sequences only
    cudnn_attention.py    the "cudnn" backend: jax.nn.dot_product_attention(implementation="cudnn")
    blocks.py             block sizes per platform, padding

Nothing is imported here: Pallas (~0.1 s to import) loads only when the "pallas" backend first runs.
"""
