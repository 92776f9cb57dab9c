"""Tool use from a format-only warm start: products the tiny model cannot work out in its head, and a calculator
it may call (`calc: 4821*3719`, the env appends `= 17929299`) before it answers (`Answer: 17929299`), in free
text with the games' BPE tokenizer (each digit one token), two stages as configs/free_tic_tac_toe.py.

    .venv/bin/python experiments/train.py --config=configs/calculator.py:format    # stage 1: the format
    .venv/bin/python experiments/train.py --config=configs/calculator.py           # stage 2: RL from it

Stage 1 (`:format`, sft): SFT of a random tiny model on transcripts of a player who calls the calculator on
random operands or answers a random number (a coin each turn; data/teachers.py `random_tool`), deaf to the
problem and to the calculator: it learns to write calls and answers and nothing about which numbers, so it
solves none of the held-out problems (its eval.json). Stage 2 (lm_rl): PPO on its adapters, free text, exact
parsing (a reply besides a call or an answer: -1), +1 for the product, and the dense `call_credit` (the first
call earns the share of the problem it names), paid digit by digit (`credit="token"`: each digit of a call its
own part), an entropy bonus of 0.05 and a constant lr (the copying shows up after ~2000 updates; annealed over
1000 updates, or at entropy 0.01, the calls never leave chance). Sampled success per update in metrics.csv
(`solved_rate`), greedy on 256 held-out problems at the end. `--config.env_kwargs.digits="(1, 2, 3, 4)"` (both
stages) is a curriculum of operand lengths; `--config.env_kwargs.tool=False` asks the same products with no
calculator. `--config.env_kwargs.copy_credit=1.0` also pays an answer for repeating the calculator's result
(right call or not); measured, it ties the call to a constant (docs/results.md). Measured: docs/results.md,
"Tool use: a calculator from a format-only warm start".
"""

from jaxmarl_llm.train.config.free_text import free_text_defaults

# prompt 43 BPE tokens + the problem 14 + 3 x (a reply <= 16 + a result <= 12) fits 160
ENV = {"digits": (4,), "max_turns": 3, "tool": True, "call_credit": 0.0, "answer_credit": 0.0, "copy_credit": 0.0,
       "candidates": False, "answer_last": False, "answer_align": "units", "capacity": 160,
       "max_action_tokens": 16}
MODEL = {"max_position_embeddings": 176, "hidden_size": 128, "intermediate_size": 256, "num_heads": 8}


def get_config(variant: str = ""):
    c = free_text_defaults(variant, "calculator", "text/calculator", ENV, MODEL, num_turns=3, format_updates=300,
                           rl_updates=5000)
    c.eval_episodes = 256  # greedy, held-out problems
    if variant == "format":
        return c
    c.env_kwargs["call_credit"] = 0.5  # the answer's own credit is a trap (envs/text/calculator.py)
    # greedy on 256 held-out problems every 250 updates: eval/solved in metrics.csv (the curve)
    c.in_graph_eval.update(every=250, episodes=256)
    c.gamma = 1.0  # the call's credit is the answer it makes possible
    c.credit = "token"  # each digit of a call paid for itself (the env's info["token_reward"])
    c.ent_coef, c.anneal_lr = 0.05, False
    return c
