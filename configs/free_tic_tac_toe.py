"""Tic-tac-toe in free text from a format-only warm start: the games' BPE tokenizer, the game's own prompt, replies
written token by token (`Move: 5`, no constrained decoding), two stages.

    .venv/bin/python experiments/train.py --config=configs/free_tic_tac_toe.py:format    # stage 1: the format
    .venv/bin/python experiments/eval.py --config=configs/free_tic_tac_toe.py \\
        --config.model.checkpoint=runs/free_tic_tac_toe_format/model --opponent=random --episodes=400
    .venv/bin/python experiments/train.py --config=configs/free_tic_tac_toe.py           # stage 2: RL from it

Stage 1 (`:format`, sft, ~4 minutes): SFT of a random tiny model on transcripts of a uniformly random legal player
(data/teachers.py `random_cell`, every move a target): it learns to answer `Move: N` with an empty cell and
nothing about which one, so greedy it plays about as a random player does (eval.py above: its zero-skill
evaluation). Stage 2 (lm_rl): PPO on that model's adapters against the league of built-in players (random and
minimax, the learner in a random seat), free text: an unparsable reply or an occupied cell loses the game (-2).
In-graph evaluation every 250 updates (`eval/random_loss`, `eval/minimax_draw`, `format_error_rate`).
Observations are the current position only (`history=False`): the seat, the board, the status line (~30 BPE
tokens); `tokenizer` is the games' BPE folder (jaxmarl_llm/assets/games_bpe, tools/train_tokenizer.py), loaded
as a checkpoint's tokenizer is. `--config.model.checkpoint=<HF folder>
--config.tokenizer=<HF folder>` runs the same recipe on a real model (docs/byo_checkpoint.md);
`--config.model.preset=qwen3-0.6b --config.model.checkpoint=` on that architecture with random weights.
Measured exactly (every position's greedy move, `eval.py ... --exact`; AMD EPYC, 2 shared cores): the warm start
loses 41.1% against random and draws 26.3% against minimax (random play: 43.7%, 12.7%); RL to update 3000 (~56
min): 6.16% and 5.95% losses (seeds 0, 1; as O 12.1%, 11.1%), 89.4% and 91.6% draws; with X and O each their own
adapter (`--config.share_policy=False`) 6.19%, 4.71% and 5.88% (seeds 0-2), 89.4%, 94.0% and 93.3%; adding an
entropy bonus on the move alone that falls to 0 (`--config.entropy_tokens=digits --config.ent_coef=0.03
--config.ent_coef_end=0`) seeds 0 and 1 reach 4.52% and 4.04%, 94.4% each (both targets); O's misses of an immediate win or block are the gap
(docs/results.md, "Free text from a format-only warm start").
"""

from jaxmarl_llm.train.config.free_text import free_text_defaults

ENV = {"capacity": 40, "max_action_tokens": 8, "board": "grid", "history": False, "exact": True}
# a row is at most 40 + 8 + 1 tokens; width 128 (2 layers, 8 heads of 16): at width 64 the learner as O stayed at
# 15-20% losses against random however long it trained (docs/results.md)
MODEL = {"max_position_embeddings": 64, "hidden_size": 128, "intermediate_size": 256, "num_heads": 8}


def get_config(variant: str = ""):
    # 600 format updates: sampled from the warm start, 6% of moves name a taken cell and 0.6% do not parse (after
    # 200 updates 18% and 2.2%, each a lost game RL must first unlearn; greedy both are 0)
    c = free_text_defaults(variant, "free_tic_tac_toe", "text/tic_tac_toe", ENV, MODEL, num_turns=9,
                           format_updates=600, rl_updates=3000)
    if variant == "format":
        return c
    c.share_policy = True
    # entropy bonus 0.05: the bonus is a mean over the reply's ~5 tokens, and only the cell's digit is free to vary
    # (0.01 per digit, as the constrained recipe's over its moves)
    c.ent_coef = 0.05
    c.opponent_pool.update(size=1, random=0.5, minimax=0.5)  # the league: built-in players only
    # exact: also the greedy policy's exact rates from its move at every position (eval/exact_random_loss, ...):
    # 400 sampled games estimate a 6% loss rate to +-1.2 points
    c.in_graph_eval.update(every=250, episodes=400, exact=True)
    c.run.eval_targets = {"eval/exact_random_loss": 0.05, "eval/exact_minimax_draw": 0.8}
    return c
