"""Guess the number in free text from a format-only warm start: the games' BPE tokenizer (each digit one token),
the game's own prompt and answers, replies written token by token (`Guess: 517`, no constrained decoding), two
stages, as configs/free_tic_tac_toe.py.

    .venv/bin/python experiments/train.py --config=configs/free_guess_number.py:format    # stage 1: the format
    .venv/bin/python experiments/train.py --config=configs/free_guess_number.py           # stage 2: RL from it

Stage 1 (`:format`, sft): SFT of a random tiny model on transcripts of a player who guesses a uniformly random
number in range every turn, deaf to the answers (data/teachers.py `random_guess`, every guess a target): it
learns to write `Guess: N` and nothing about which N, so it finds about 1% of the secrets (its held-out
evaluation, written to <out_dir>/eval.json, is its zero-skill check). Stage 2 (lm_rl): PPO on that model's
adapters with the dense reward of the bits each guess removes (`info_bonus`: bisection earns the most), free
text, exact parsing (anything besides `Guess: N` is a format error, -1). In-graph evaluation: greedy play on the
205 held-out secrets every 250 updates (`eval/solved` in metrics.csv) and after training (`eval_episodes`,
eval.json), sampled success per update.
`--config.model.preset=qwen3-0.6b` or `--config.model.checkpoint=<HF folder> --config.tokenizer=<HF folder>` run
the same recipe on a real model.
Measured (seed 0, 2 shared Xeon cores): the warm start solves 0.49% of the held-out secrets; RL to update 520
keeps sampled success at 0.8-1.4% (the first guess learns to bisect, the later ones do not read the answers):
far from the 90% target; docs/results.md, "Free text from a format-only warm start", says what limits it.

A curriculum by mixture, both stages with the same overrides: `--config.env_kwargs.sizes="(16, 64, 256, 1024)"`
(each game's range drawn from these), `--config.env_kwargs.say_range=True` (the interval left, in words after
each answer) with `--config.env_kwargs.capacity=352 --config.model.max_position_embeddings=368` (ten answers
with their intervals overflow 256 tokens). Measured: held-out success on the full range 1.95% after 1500 updates;
with `--config.env_kwargs.bonus=expected` (each guess paid the bits it removes in expectation over the secrets
still possible, not those of the actual secret) 1.46%: the guesses leave the stated interval after two or three
answers (the run's transcripts.jsonl); the same at width 128 (`--config.model.hidden_size=128
--config.model.intermediate_size=256 --config.model.num_heads=8`, both stages) 4.9%; at width 128 with
`--config.env_kwargs.bonus=worst` (the bits removed whichever the answer: sharp at the midpoint) and
`--config.gamma=0` 0.98%; each digit paid its own part (`--config.env_kwargs.digit_credit=True
--config.credit=token_by_turn`, gamma 0, `bonus=expected`) 0.49%: with gae_lambda 0.95 the parts add up to the
same returns, and at gae_lambda 0.5 (with critic.lr=1e-3: 1e-2 overshoots a per-token value) the curve is the
same (docs/results.md); every number in four digits (`--config.env_kwargs.padded=True`, capacity 384, both
stages) 2.4% after 1000 updates.
"""

from jaxmarl_llm.train.config.free_text import free_text_defaults

# prompt 57 BPE tokens + 10 x (a guess <= 7 + end + an answer <= 5) fits 200; an invalid reply's answer is 24
ENV = {"capacity": 256, "max_action_tokens": 8, "exact": True, "sizes": (1024,), "say_range": False,
       "bonus": "found", "digit_credit": False, "padded": False}
# bonus: what info_bonus pays (envs/text/guess_number.py): the bits found, "expected" or "worst"; digit_credit: a
# split bonus paid digit by digit (with --config.credit=token); padded: every number in four digits (`Guess: 0517`)
MODEL = {"max_position_embeddings": 272}


def get_config(variant: str = ""):
    c = free_text_defaults(variant, "free_guess_number", "text/guess_number", ENV, MODEL, num_turns=10,
                           format_updates=200, rl_updates=1500)
    c.eval_episodes = 205  # every held-out secret once, greedy
    if variant == "format":
        return c
    c.env_kwargs["info_bonus"] = 1.0  # each guess earns the share of the 10 bits it removes
    # the bonus grades each move by what it finds now (bisection / the best split is its greedy optimum): returns
    # discounted at 0.5 keep a move's credit mostly its own; no entropy bonus (the warm start's replies are as
    # random as a uniform player's, and a bonus of 0.05 held them there)
    c.ent_coef, c.gamma = 0.0, 0.5
    # greedy play on the held-out secrets (full range) every 250 updates: eval/solved, eval/mean_return
    c.in_graph_eval.update(every=250, episodes=205)
    return c
