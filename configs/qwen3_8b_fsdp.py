"""Debate (configs/debate.py's game, rule judge) on a Qwen3-8B base sharded over 8 devices: a layout for a v5e-16
TPU slice or two 8-GPU H100 nodes, 16 devices as a mesh of data=2 rows x fsdp=8.

    python experiments/train.py --config=configs/qwen3_8b_fsdp.py \\
        --config.model.checkpoint=/path/to/Qwen3-8B --config.tokenizer=/path/to/Qwen3-8B

Run it on every host as README.md's "Run on a TPU pod / GPU cluster" says (JAXMARL_MULTIHOST=1;
`tpu_scripts/launch.sh` or `launch/slurm.sbatch`). The checkpoint (a local Hugging Face folder) is required: the
placeholder below is not a folder, so the config stops at start-up until it is given. Not run here (no pod, no
8B weights in this repository): tests/test_fsdp.py checks that it validates up to the checkpoint and that the
table below is `memory_table()`'s.

Model: Qwen3-8B (hidden 4096, 36 layers, 32 query / 8 KV heads of 128, MLP 12288, vocab 151936, untied LM head),
8.19e9 weights, 15.26 GiB in bfloat16: more than a v5e chip's 16 GiB can hold with anything else. With
`mesh.fsdp=8` every matrix is split 8 ways (models/fsdp.py: the embedding and LM head on the vocabulary, q/k/v/o
and the MLP on their largest dimension) and each forward gathers one layer at a time; the two data rows hold
the same blocks. Adapters: one shared rank-16 LoRA on all seven projections of every layer (both debaters,
self-play) and a value head (unused by GRPO, still built), float32, replicated, with Adam.

Batch: 128 debates per update = 16 groups of 8 sharing a motion (GRPO), 8 per device (data and fsdp split the
batch, train/mesh.py): 2 LM seats each, 1664-token KV rows (capacity 1536 + a 128-token speech), 2 rounds, so each
learning seat scores 256 action tokens. The loss runs one episode at a time (num_microbatches=8: exact
gradient accumulation over the device's 8 episodes).

Per device (jaxmarl_llm/train/memory.py `lm_rl_memory`; exact for weights, adapters, Adam and cache, an
estimate for the activations; XLA adds buffers of its own, so keep a few GiB free):

                                                      fsdp=8        fsdp=1
base weights (sharded over fsdp)                    1.91 GiB     15.26 GiB
one gathered layer (transient)                      0.36 GiB      0.00 GiB
gathered embedding or LM head (transient)           1.16 GiB      0.00 GiB
adapters + value heads (float32, replicated)        0.16 GiB      0.16 GiB
Adam moments (2 x adapters + heads)                 0.33 GiB      0.33 GiB
gradients (transient)                               0.16 GiB      0.16 GiB
KV cache (rollout)                                  3.66 GiB      3.66 GiB
KV cache: movers' rows (transient copy)             1.83 GiB      1.83 GiB
loss: kept for the backward (all layers)            0.91 GiB     14.17 GiB
loss: one layer's intermediates + grads             0.79 GiB      0.79 GiB
loss: logits at scored tokens (float32, x3)         0.87 GiB      0.87 GiB
peak estimate: persistent + max(rollout, loss)      9.04 GiB     31.73 GiB

How to read it: sharded, the base takes 1.91 GiB a device instead of 15.26, and the loss keeps each layer's
input only (the layers are rematerialised under FSDP) instead of every intermediate: ~9 GiB at the peak, inside
a v5e chip's 16 GiB. Whole (fsdp=1) it would not fit a v5e chip at all; on 80 GiB H100s it would, and there
fsdp=8 buys room instead: more episodes or longer debates per device (num_envs, capacity), the KV cache being
the next largest term. The price of sharding is traffic: each forward (a prefill chunk or one decode step)
gathers the whole base, 7/8 of 15.26 GiB into each device, so decoding small batches is bound by the
interconnect (ICI on TPU, NVLink inside an H100 node; a data row never spans the two nodes).
"""

from jaxmarl_llm.models.config import PRESETS
from jaxmarl_llm.train import memory
from jaxmarl_llm.train.config import lm_rl_defaults

CHECKPOINT = "/path/to/Qwen3-8B"  # placeholder: pass --config.model.checkpoint (and --config.tokenizer)
NUM_DEVICES, FSDP = 16, 8  # v5e-16, or 2 nodes x 8 H100: data = 2 rows of 8


def get_config():
    c = lm_rl_defaults()
    c.env_name = "text/debate"
    rounds = 2
    c.env_kwargs = {"judge": "rule", "rounds": rounds, "capacity": 1536, "max_action_tokens": 128}
    c.tokenizer = CHECKPOINT
    c.model.checkpoint = CHECKPOINT
    c.model.dtype = "bfloat16"
    c.algo = "grpo"
    c.share_policy = True
    c.num_turns = 2 * rounds  # A, B, A, B
    c.num_envs = 128  # 8 per device: a multiple of num_devices x group_size = 16 x 8
    c.group_size = 8
    c.num_minibatches = 1
    c.num_microbatches = 8  # one episode's forward and backward at a time
    c.lr = 2e-5
    c.total_episodes = 128 * 200
    c.eval_episodes = 0  # a held-out evaluation after training would need the whole base on one device
    c.mesh.num_devices = 0  # every device of the slice / the job
    c.mesh.fsdp = FSDP
    c.run.out_dir = "runs/qwen3_8b_fsdp"  # on several hosts: a folder every host mounts at the same path
    c.run.updates_per_chunk = 1
    c.run.checkpoint_every = 10
    return c


def memory_table() -> str:
    """The docstring's table: `lm_rl_memory` for this config on NUM_DEVICES devices, sharded and whole."""
    c = get_config()
    cfg = PRESETS["qwen3-8b"].replace(dtype=c.model.dtype, param_dtype=c.model.dtype)
    kw = dict(num_devices=NUM_DEVICES, num_envs=c.num_envs, lm_seats=2, movers=1,
              context=c.env_kwargs["capacity"] + c.env_kwargs["max_action_tokens"], loss_seats=2,
              scored_tokens=c.env_kwargs["rounds"] * c.env_kwargs["max_action_tokens"], lora_rank=c.lora.rank,
              lora_targets=tuple(c.lora.targets), num_minibatches=c.num_minibatches,
              num_microbatches=c.num_microbatches)
    return memory.format_table({f"fsdp={FSDP}": memory.lm_rl_memory(cfg, fsdp=FSDP, **kw),
                                "fsdp=1": memory.lm_rl_memory(cfg, fsdp=1, **kw)})
