"""SFT a tiny from-scratch model to judge debates as the rule does: the frozen judge of configs/debate.py:trained_judge.

    .venv/bin/python experiments/train.py --config=configs/sft_debate.py             # -> runs/sft_debate_judge/model
    .venv/bin/python experiments/train.py --config=configs/debate.py:trained_judge   # then the debaters learn by RL

The game is debate with an LM judge (`judge="lm"`: seat 2 reads the whole debate and replies `Winner: A` /
`Winner: B`). The teacher (jaxmarl_llm/data/teachers.py `marker_debater`, `script_noise=1`) has both debaters say
random canned arguments (played, not targets) and the judge name the rule judge's winner: the debater who used
more distinct argument markers (data/argument_markers.txt). `target_agents=(2,)` trains the judge seat alone; a
rule draw (23% of random debates) is not a target. Every update's debates are fresh, so the per-seat metric
`move_accuracy_judge` (the greedy verdict under teacher forcing equals the rule's) is the judge's agreement with
the rule on unseen random debates.
Whole words as tokens (`tokenizer="word"`): an argument is 8-25 tokens, the judge's transcript at most 217.
Every weight trains (hidden 64, 2 layers, init std 0.1); 1500 updates x 32 debates, lr 3e-3.
Measured (seed 0, 2 CPU cores shared, ~6 min): agreement on fresh random debates 0.52 (updates 1-100) -> 0.92
(401-500) -> 0.999 (1401-1500). Keep the full 1500 updates: at 300 the judge, near 1.0 on random debates, still
misjudges 26% of the RL debaters' debates (they repeat arguments). configs/debate.py has the RL step's results.
Options: `--config.total_episodes`, `--config.lr`, `--config.seed`.
"""

from jaxmarl_llm.train.config import sft_defaults


def get_config(variant: str = ""):
    if variant not in ("", "judge"):
        raise ValueError(f"configs/sft_debate.py:{variant}: the variant is 'judge' (default)")
    c = sft_defaults()
    c.env_name = "text/debate"
    c.tokenizer = "word"
    # the judge's transcript: prompt, motion, 4 arguments with their labels, the question: <= 217 tokens
    c.env_kwargs = {"judge": "lm", "rounds": 2, "capacity": 224, "max_action_tokens": 26}
    c.model.update({"hidden_size": 64, "intermediate_size": 256, "num_layers": 2, "num_heads": 4,
                    "num_kv_heads": 2, "head_dim": 16, "max_position_embeddings": 256,
                    # the RL defaults' scale: from init_std 0.02 the judge learns slower and the debaters' adapters
                    # on it hardly move (a small-scale base passes LoRA's change on weakly)
                    "init_std": 0.1})
    c.train_base = True
    c.script_noise = 1.0  # random debates: the judge must read every argument, not one fixed pair
    c.target_agents = (2,)  # the judge seat alone; the debaters' random arguments are not targets
    c.num_envs = 32
    c.num_turns = 5  # A, B, A, B, verdict
    # agreement on fresh random debates is ~1.0 by update 300, but that judge misjudges 26% of the RL debaters'
    # debates (they repeat arguments); at 1500, 0%
    c.total_episodes = 32 * 1500
    c.lr = 3e-3
    c.warmup_updates = 20
    c.run.out_dir = "runs/sft_debate_judge"
    c.run.updates_per_chunk = 25
    c.run.checkpoint_every = 4
    return c
