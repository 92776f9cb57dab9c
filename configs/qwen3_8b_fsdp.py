"""Debate (configs/debate.py's game, rule judge) by GRPO on a Qwen3-8B base sharded 8 ways: a layout for a v5e-16
TPU slice or two 8-GPU H100 nodes, 16 devices as a mesh of data=2 rows x fsdp=8.

    .venv/bin/python experiments/train.py --config=configs/qwen3_8b_fsdp.py \\
        --config.model.checkpoint=/path/to/Qwen3-8B --config.tokenizer=/path/to/Qwen3-8B

Run it on every host as docs/running.md ("TPU pods and GPU clusters") says (JAXMARL_MULTIHOST=1;
`tpu_scripts/launch.sh` or `launch/slurm.sbatch`). The checkpoint (a local Hugging Face folder) is required: the
config stops at start-up until it is given. Seats: both debaters learn one shared rank-16 LoRA on all seven
projections of every layer (self-play), float32 with Adam, over the frozen bfloat16 base, whose every matrix is
split 8 ways (models/fsdp.py) and gathered one layer at a time. Batch: 128 debates an update = 16 GRPO groups of
8, 8 per device, 1664-token KV rows, one episode's loss at a time (`num_microbatches=8`). No training result:
there is no pod here; tests/test_fsdp.py checks the config validates up to the checkpoint and that this table is
`memory_table()`'s. Per device (jaxmarl_llm/train/lm/memory.py `lm_rl_memory`; activations estimated, keep a few GiB
free for XLA's own buffers):

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

Sharded, the peak fits a v5e chip's 16 GiB; whole, only an 80 GiB H100, where fsdp=8 buys room for more or longer
debates (`--config.num_envs`, `--config.env_kwargs.capacity`). Each forward gathers 7/8 of the base into every
device, so decoding small batches is bound by the interconnect (a data row stays inside one node).
Options: `--config.mesh.fsdp`, `--config.lr`, `--config.total_episodes`.
"""

from jaxmarl_llm.models.config import PRESETS
from jaxmarl_llm.train.config import lm_rl_defaults
from jaxmarl_llm.train.lm import memory

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
