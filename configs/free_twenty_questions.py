"""Twenty questions against the oracle in free text from a format-only warm start: the games' BPE tokenizer, the
game's own prompt (its 60 questions listed by name), replies written token by token (`Ask: mammal`,
`Guess: dog`), two stages, as configs/free_tic_tac_toe.py.

    .venv/bin/python experiments/train.py --config=configs/free_twenty_questions.py:format    # stage 1: the format
    .venv/bin/python experiments/train.py --config=configs/free_twenty_questions.py           # stage 2: RL from it

Stage 1 (`:format`, sft): SFT of a random tiny model on transcripts of a questioner who asks a uniformly random
listed question every turn and guesses a uniformly random word on the last (data/teachers.py `random_questions`,
every move a target): it learns to ask and guess in the game's words and nothing about which question or word,
so it finds about 1 word in 187 (its greedy evaluation over every word, <out_dir>/eval.json, is its zero-skill
check). Stage 2 (lm_rl): PPO on its adapters with the information bonus (the share of the log2(187) bits each
question or guess removes, from the oracle's table) and -0.25 for a reply that is neither a listed question nor
a guess. Greedy evaluation over every word after training (`eval_episodes`); sampled success in metrics.csv.
Measured (seed 0, 2 shared Xeon cores): the warm start solves 0.53% of the words; RL over 200 updates (6.5 min)
raises the sampled return (bits found) 0.32 -> 0.46 while wins stay under 1%: it learns to ask, not to guess.
"""

from jaxmarl_llm.train.config.free_text import free_text_defaults

# prompt 203 BPE tokens + 8 x (a reply <= 5 + end + an answer <= 20) fits 384
ENV = {"answerer": "oracle", "max_turns": 8, "capacity": 384, "max_action_tokens": 8, "format_penalty": -0.25,
       "bonus": "found",  # what info_bonus pays (envs/text/twenty_questions.py): the bits found, or "expected"
       "guess_last": False}  # True: a question on the last turn is refused (the round ends with a guess)
MODEL = {"max_position_embeddings": 400}


def get_config(variant: str = ""):
    c = free_text_defaults(variant, "free_twenty_questions", "text/twenty_questions", ENV, MODEL,
                           num_turns=ENV["max_turns"], format_updates=400, rl_updates=400)
    c.eval_episodes = 187  # every word once, greedy
    if variant == "format":
        return c
    c.env_kwargs["info_bonus"] = 1.0
    # the bonus grades each move by what it finds now (bisection / the best split is its greedy optimum): returns
    # discounted at 0.5 keep a move's credit mostly its own; no entropy bonus (the warm start's replies are as
    # random as a uniform player's, and a bonus of 0.05 held them there)
    c.ent_coef, c.gamma = 0.0, 0.5
    return c
