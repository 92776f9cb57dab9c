"""Twenty questions: one LM questioner finds a secret noun (187 words) with yes/no questions, then guesses it.

Seats: the questioner learns (one adapter). The answerer is the env's oracle (default, `:oracle`: it answers from
the word list's attribute table, and the prompt lists its 60 questions, `Ask: mammal`) or, with `:lm` and
`:lm_scratch`, a frozen LM (agent 1, the bare base model with the secret in its prompt; a question is then two
turns). Reward +1 when the word is guessed within `max_turns` (8). GRPO over groups of 4 games sharing the secret,
16 games an update, lr 1e-4, kl_coef 0.05 to the warm-start model. A random tiny model asks nothing listed, so RL
starts from configs/sft_twenty_questions.py's model (teacher `greedy_splitter`: 68.4% of the words, the optimum;
for `:lm` give both configs `:lm` and the model runs/sft_twenty_questions_lm/model):

    .venv/bin/python experiments/train.py --config=configs/sft_twenty_questions.py
    .venv/bin/python experiments/train.py --config=configs/twenty_questions.py \\
        --config.model.checkpoint=runs/sft_twenty_questions/model --config.eval_episodes=187

Measured (seed 0, 2 shared CPU cores, greedy over every word once): oracle, 58.3% (SFT) -> 60.4% (113/187) after
100 updates (14 min); `:lm`, whose answerer agrees with the oracle on 99.5% of its answers, 67.4% (126/187) with or
without RL (8 turns certify at most 68.4%). experiments/eval.py `--opponent=base` reports `answer_accuracy`.
`:lm_scratch`: the questioner learns by GRPO alone (constrained to the 60 questions and 187 guesses, `fresh_only`)
against the frozen answerer of configs/sft_twenty_questions.py:answerer
(`--config.model.checkpoint=runs/sft_twenty_questions_answerer/model`): 4.28% solved untrained and after 300 updates
x 64 games (10.5 min). `:scratch`: the questioner from scratch against the oracle, PPO with a value head and the
information bonus (`env_kwargs.info_bonus=1.0`, `guess_last=True`); over 210 updates (lr annealed over 500) it
learns to ask (bits found 30% -> 62%) but not to guess (wins 0.8% -> 0.3%).
Options: `--config.model.checkpoint=/path/to/hf --config.tokenizer=/path/to/hf` (a real checkpoint; its tokenizer
fits the full game: `--config.env_kwargs.max_turns=20 --config.num_turns=20`, 40 with `:lm`).
"""

from jaxmarl_llm.train.config import lm_rl_defaults


VARIANTS = ("", "oracle", "scratch", "lm", "lm_scratch")


def get_config(variant: str = ""):
    if variant not in VARIANTS:
        raise ValueError(f"configs/twenty_questions.py:{variant}: the variant is 'oracle' (default), 'scratch', "
                         "'lm' or 'lm_scratch'")
    c = lm_rl_defaults()
    c.env_name = "text/twenty_questions"
    max_turns = 8
    c.env_kwargs = {"answerer": "oracle", "max_turns": max_turns, "capacity": 1024, "max_action_tokens": 20}
    c.algo = "grpo"
    c.share_policy = True
    c.num_turns = max_turns  # one questioner turn per step with the oracle
    if variant in ("lm", "lm_scratch"):
        c.env_kwargs["answerer"] = "lm"
        c.env_kwargs["capacity"] = 384  # no list of names in the prompt: 328 tokens at most (sft_twenty_questions.py:lm)
        c.frozen_agents = (1,)  # the answerer: the bare base model (the SFT model in the recipe), never trained here
        c.num_turns = 2 * max_turns  # question, answer, question, ...
    c.num_envs = 16
    c.group_size = 4
    c.lr = 1e-4  # small: 1e-3 without KL undoes the SFT warm start
    c.kl_coef = 0.05  # to the bare base, i.e. the warm-start model
    c.total_episodes = 16 * 100
    c.run.out_dir = "runs/twenty_questions" + (f"_{variant}" if variant in ("scratch", "lm", "lm_scratch") else "")
    c.run.updates_per_chunk = 5
    if variant in ("scratch", "lm_scratch"):
        questioner_from_scratch(c)
    if variant == "scratch":
        oracle_study(c)
    return c


def oracle_study(c) -> None:
    """`:scratch`: tic-tac-toe's from-scratch recipe (PPO with a value head, lr 1e-3 annealed, entropy bonus) with
    the information bonus and a closing guess, the run measured in the docstring."""
    c.algo, c.group_size = "ppo", 1
    c.anneal_lr, c.ent_coef, c.critic.lr = True, 0.01, 1e-2
    c.env_kwargs.update({"info_bonus": 1.0, "guess_last": True})
    c.total_episodes = 64 * 210


def questioner_from_scratch(c) -> None:
    """`:lm_scratch`: the questioner learns by RL alone against an answerer-only SFT model (see the docstring)."""
    c.policy.actions = "constrained"  # listed questions / words (questioner), Yes / No (the frozen answerer)
    c.tokenizer = "word"  # the answerer's (configs/sft_twenty_questions.py:answerer): the same env texts, the same ids
    # fresh_only: no question asked twice, no word guessed twice (a wasted turn a random start makes often)
    # the oracle's prompt lists the 60 names (275 word tokens); the lm game's prompt does not
    capacity = 208 if c.env_kwargs["answerer"] == "lm" else 352
    c.env_kwargs.update({"capacity": capacity, "max_action_tokens": 8, "fresh_only": True, "info_bonus": 0.0,
                         "guess_last": False})
    c.kl_coef = 0.0  # the base never learnt the questioner's role: nothing there worth staying near
    c.lr = 1e-3  # 3e-3 collapses to one reply (entropy 0) in ~150 updates
    # 8 groups of 8 episodes: ~3% of random games score, so a group of 4 rarely holds a win to learn from
    c.num_envs, c.group_size = 64, 8
    c.total_episodes = 64 * 300
    c.eval_episodes = 187  # every word once, greedy
