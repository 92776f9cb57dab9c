"""Tool use from a format-only warm start: products of two 2-digit numbers, which the tiny model cannot work out
in its head, and a calculator it may call (`calc: 48*37`, the env appends `= 1776`) before it answers
(`Answer: 1776`), in free text with the games' BPE tokenizer (each digit one token). Four stages, each a command;
the three RL stages continue one run (runs/calculator), each with the reward of what it teaches:

    .venv/bin/python experiments/train.py --config=configs/calculator.py:format   # 1: the format (SFT, ~1 min)
    .venv/bin/python experiments/train.py --config=configs/calculator.py          # 2: the call, to update 10 000
    .venv/bin/python experiments/train.py --config=configs/calculator.py:answer \
        --config.resume=True --config.resume_force=True                            # 3: read the result, to 13 400
    .venv/bin/python experiments/train.py --config=configs/calculator.py:lead \
        --config.resume=True --config.resume_force=True                            # 4: every digit, to 15 200

Stage 1 (`:format`, sft): SFT of a random tiny model on transcripts of a player who calls the calculator on random
operands or answers a random number (a coin each turn; data/teachers.py `random_tool`), deaf to the problem and to
the calculator: it learns to write calls and answers and nothing about which numbers, so it solves none of the
held-out problems (its eval.json). Stage 2 (lm_rl): PPO on its adapters, free text, exact parsing (a reply besides
a call or an answer: -1), +1 for the product, and the dense `call_credit` (the first call earns the share of the
problem it names), paid digit by digit (`credit="token"`: each digit of a call its own part), an entropy bonus of
0.05, a constant lr and each update's step held to a KL of 0.01 on its batch (`max_step_kl`: without it one update
at ~2200 turned every reply malformed). The calls leave chance after ~5000 updates and name the problem by
~10 000 (held-out greedy `eval/mean_return` ~0.48 of the call's 0.5); where they come later, continue the stage
500 updates at a time (`--config.resume=True --config.total_episodes=$((32 * U))`) until that return is >= 0.46,
and give stages 3 and 4 their 3400 and 1800 updates from U (`--config.total_episodes=$((32 * (U + 3400)))`, then
`$((32 * (U + 5200)))`): stage 3's credit is a trap until the calls are right. The stage can stall short of
0.46: on a fourth run every character of the call but the first operand's units digit was right by ~10 000, and
that digit stayed at chance to 16 000 (return ~0.41): no head read the problem from its position
(`tools/calculator_attention.py`), and no batch, lr, epoch or entropy setting tried moved it.
`--config.env_kwargs.compact_problem=True` (every stage, the format's too) writes the problem as the call does
(`95*66`, not `95 * 66`): every digit then sits at one distance from its copy. Measured once: the call stage
ended at 5500 updates (held-out return 0.481), heads reading the problem for every digit; its `:lead` did not
start (answers nine digits long), as on two spaced runs; nor on a second compact run from stage 3's best held-out
evaluation (`--config.run.keep_best=eval/mean_return` in stage 3, then `experiments/branch.py --at=best` and the
stage in the branch): that peak answered the units digit alone, and the count from the leading digit grew it into
nine digits; with `length_cost=0.5` it started and stopped at three digits (17% held-out: the 3-digit products).
The compact call stage can stall too: on an Intel Xeon host it held a return of 0.32 from 7000 to 8500 updates,
both operands' units at chance and read by no head (`tools/calculator_attention.py`).
`--config.env_kwargs.result_field=True` (every stage) writes the result left-aligned in four places (`= 627 `), so
an answer copies every digit from one distance whatever the result's length (without it the 3-digit plateau above
reads 4-digit results at the 3-digit distance); it is untested on a learned call.
Stage 3 (`:answer`) adds the answer's digit credit (`answer_credit`, places counted from the units): the answer
learns to read the calculator's result, units and tens first, to a plateau (held-out greedy return 0.77 in the
measured run, 0.71 in a second). Stage 4 (`:lead`) counts the answer's places from its leading digit
instead (`answer_align="lead"`, the order a copy is written in): in the measured run every digit within ~1000
updates, 98.8% of 256 held-out problems solved greedy; it is not reliable: in two more runs of these stages it did
not start (one's stage 3 ended on a pad before the whole copy, `Answer977773627` for 3627, which the count from
the leading digit pays nothing; from that stage 3, `:lead` with a cost on each digit beyond the product's length,
`--config.env_kwargs.length_cost=0.5`, started after ~1100 updates, 60-73% held-out by 1800: docs/results.md).
The right answer earns 1 in every stage. Greedy on 256 held-out problems every 500 updates: `eval/solved` in
metrics.csv (the curve); sampled success per update: `solved_rate`. `--config.env_kwargs.digits="(1, 2, 3, 4)"`
(every stage) is a curriculum of operand lengths; `--config.env_kwargs.tool=False` asks the same products with no
calculator.
Measured: docs/results.md, "Tool use: a calculator from a format-only warm start".
"""

from jaxmarl_llm.train.config.free_text import free_text_defaults

# prompt 43 BPE tokens + the problem 14 + 3 x (a reply <= 16 + a result <= 12) fits 160
ENV = {"digits": (2,), "max_turns": 3, "tool": True, "call_credit": 0.0, "answer_credit": 0.0, "copy_credit": 0.0,
       "candidates": False, "answer_last": False, "answer_align": "units", "length_cost": 0.0, "capacity": 160,
       "max_action_tokens": 16, "compact_problem": False, "result_field": False}
MODEL = {"max_position_embeddings": 176, "hidden_size": 128, "intermediate_size": 256, "num_heads": 8}
# the RL stages continue one run: each ends at its update (32 episodes each)
STAGE_END = {"": 10_000, "answer": 13_400, "lead": 15_200}


def get_config(variant: str = ""):
    if variant not in ("format", *STAGE_END):
        raise ValueError(f"configs/calculator.py:{variant}: the variant is format, none, answer or lead")
    c = free_text_defaults("format" if variant == "format" else "", "calculator", "text/calculator", ENV, MODEL,
                           num_turns=3, format_updates=300, rl_updates=STAGE_END.get(variant, 0))
    c.eval_episodes = 256  # greedy, held-out problems
    if variant == "format":
        return c
    c.env_kwargs["call_credit"] = 0.5  # the answer's own credit is a trap before the calls are right
    if variant in ("answer", "lead"):
        c.env_kwargs["answer_credit"] = 0.5
    if variant == "lead":
        c.env_kwargs["answer_align"] = "lead"
    # greedy on 256 held-out problems every 500 updates: eval/solved in metrics.csv (the curve)
    c.in_graph_eval.update(every=500, episodes=256)
    c.gamma = 1.0  # the call's credit is the answer it makes possible
    c.credit = "token"  # each digit of a call paid for itself (the env's info["token_reward"])
    c.ent_coef, c.anneal_lr = 0.05, False
    c.max_step_kl = 0.01
    return c
