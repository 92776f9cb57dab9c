"""Step 1 of the twenty questions recipe: SFT a tiny from-scratch model on greedy-splitter transcripts.

    python experiments/train.py --config=configs/sft_twenty_questions.py         # -> runs/sft_twenty_questions/model
    python experiments/train.py --config=configs/twenty_questions.py \\
        --config.model.checkpoint=runs/sft_twenty_questions/model --config.eval_episodes=187   # step 2: GRPO

A random tiny model never writes `Ask: <name>` or a listed word, so its success
is 0 and GRPO from scratch gets no signal: the warm start is needed. The
teacher (train/scripted.py, `greedy_splitter`, oracle answerer) keeps the set
of words the answers still allow, asks the question that splits it most evenly
(first on ties: one deterministic tree to imitate) and guesses the first
candidate on the last of the 8 turns (or when one is left). 7 questions and a
guess can certify at most 2**7 = 128 of the 187 words, and the greedy tree
reaches that: the teacher solves 68.4% of the words, all at turn 8. The student
has to memorise that tree (127 question nodes keyed on the answers so far, 128
leaf words), there is no held-out split: evaluation plays every word once.
No exploration noise (`script_noise` 0): greedy play of a perfect student
stays on the tree, and off-tree states would multiply what it must memorise.

Every weight is trained (train_base); the model is written with
hf.save_pretrained for the RL step. Sized for 2 CPU cores: char tokenizer,
hidden 64, 2 layers; the prompt alone is 652 characters and the longest game
853, so capacity 864 (the RL config's 1024 + 20 action tokens fit in
max_position_embeddings 1088).

Measured (seed 0, 2 CPU cores shared with another job, load average 4-7):
29:55 wall (500 updates in 28:06, ~3.4 s each, then the evaluation), peak RSS
7.7 GB. Teacher-forced move accuracy 0 -> 0.48 (update 125) -> 0.86 (325) -> ~1.0
(500), per-token nll 4.58 -> 0.011. Greedy over every word once: 58.3% solved
(109/187; the teacher 68.4%, the untrained model 0%), 0% format errors, all
solves at turn 8. A 400-update run of the same model reached 31.0%.

`:lm` variant: the two-seat game where a frozen LM answers (issue 17's trained counterpart). The same
teacher plays both seats (`greedy_splitter` on answerer="lm": seat 1 replies the oracle's truthful Yes/No),
both seats' moves are targets, and the one model learns both roles, each from its own transcript (the
answerer's holds the secret). RL then seats this model as the frozen answerer (the bare base) and trains
the questioner's adapter by GRPO against it:

    python experiments/train.py --config=configs/sft_twenty_questions.py:lm     # -> runs/sft_twenty_questions_lm/model
    python experiments/train.py --config=configs/twenty_questions.py:lm \
        --config.model.checkpoint=runs/sft_twenty_questions_lm/model --config.eval_episodes=187

No list of names in the questioner's prompt, so transcripts are short (capacity 384). The answerer must
memorise the ~1300 (word, question) facts on the tree (the per-seat metrics `move_accuracy_questioner` /
`move_accuracy_answerer` show the two roles), which takes 3x the questioner's updates: 1500 updates.
Measured (seed 0, 2 CPU cores shared with other jobs): 20:17 wall, peak RSS 2.9 GB. Teacher-forced
accuracy questioner / answerer: 0.57 / 0.51 (update 100), 0.98 / 0.78 (500), 1.0 / 0.94 (1000),
1.0 / 1.0 (1250). Greedy, the model in both seats over every word once: 67.4% solved (126/187; the
teacher 68.4%, the optimum for 8 turns), 0% format errors, answer accuracy against the oracle 99.5%
(1303 of 1309 answers; a random Yes/No answerer scores ~0.5; the untrained model asks no listed question
and answers nothing). A 500-update run (cosine over 500) reached 12.3% solved, answer accuracy 73.6%.

`:answerer` variant: the answerer seat alone (`target_agents=(1,)`), for a questioner that then learns by RL
from scratch (configs/twenty_questions.py:lm_scratch). Its questions come from the teacher with
`script_noise=1` and `explore="balanced"`: every question random, true half the time (only 12% of the
(word, question) table is Yes: on uniform questions the tiny model settled on "always No", 88% right).
Whole words as tokens, so the secret and the question are one token each and answering is a lookup.
Measured (seed 0, 2 CPU cores shared, 26 min for 4000 updates x 32 games): teacher-forced answer
accuracy 0.71 (updates 1-500) -> 0.95 (3501-4000); on the RL questioner's questions 92%.
"""

from jaxmarl_llm.train.config import sft_defaults


VARIANTS = ("", "oracle", "lm", "answerer")


def get_config(variant: str = ""):
    if variant not in VARIANTS:
        raise ValueError(f"configs/sft_twenty_questions.py:{variant}: the variant is 'oracle' (default), 'lm' or "
                         "'answerer'")
    c = sft_defaults()
    c.env_name = "text/twenty_questions"
    # prompt 652 tokens + 7 x (`Ask: <name>` <= 17 + "\nYes.\n") + `Guess: <word>` <= 19 + 21 of feedback <= 853
    c.env_kwargs = {"answerer": "oracle", "max_turns": 8, "capacity": 864, "max_action_tokens": 20}
    c.model.update({"hidden_size": 64, "intermediate_size": 256, "num_layers": 2, "num_heads": 4,
                    "num_kv_heads": 2, "head_dim": 16, "max_position_embeddings": 1088, "init_std": 0.02})
    c.train_base = True
    c.script_noise = 0.0  # see the docstring
    c.num_envs = 16
    c.num_turns = 8
    c.total_episodes = 16 * 500  # move accuracy ~1.0 at the end; 400 updates gave 31% success
    c.lr = 3e-3
    c.warmup_updates = 20
    c.eval_episodes = 187  # every word once, greedy (env.secrets)
    c.run.out_dir = "runs/sft_twenty_questions"
    c.run.updates_per_chunk = 25
    c.run.checkpoint_every = 4
    if variant in ("lm", "answerer"):
        lm_game(c)
    if variant == "answerer":
        answerer_only(c)
    return c


def lm_game(c) -> None:
    """The `:lm` variant: one model learns both seats of the two-seat game (see the docstring)."""
    # questioner: prompt 172 + 7 x (`Ask: <name>` <= 17 + "\nYes.\n") + guess <= 19 + 24 of feedback: 328 at most
    # (answerer 277); 384 also fits a student's longer questions, and RL's `:lm` game uses the same capacity
    c.env_kwargs = {"answerer": "lm", "max_turns": 8, "capacity": 384, "max_action_tokens": 20}
    c.num_turns = 16  # question, answer, question, ..., guess
    c.total_episodes = 16 * 1500  # the answerer memorises ~1300 (word, question) facts: slower than the questioner
    c.run.out_dir = "runs/sft_twenty_questions_lm"


def answerer_only(c) -> None:
    """The `:answerer` variant: the lm game's answerer alone learns, on random listed questions (see the docstring)."""
    c.target_agents = (1,)  # the questioner seat plays (the teacher) but is not trained: RL teaches it from scratch
    # whole words as tokens: the secret and the question are one id each, so the answerer learns a lookup
    # (word, question) -> yes/no; spelled in characters the tiny model stayed at "always No" (see the docstring)
    c.tokenizer = "word"
    # questioner: prompt 80 + 8 x (a 4-token reply + feedback <= 10) <= 192; every reply is 4 tokens at most
    c.env_kwargs.update({"capacity": 208, "max_action_tokens": 8})
    c.model.max_position_embeddings = 256
    c.num_envs = 32
    c.total_episodes = 32 * 4000  # ~1.3 k (question, word) lookups a seen 100+ times each; ~9.5 min
    c.script_noise = 1.0  # every question random: the answerer meets all 60 x 187 (question, word) pairs
    c.script_kwargs = {"explore": "balanced"}  # ... half of them true: uniform questions taught "always No" (88%)
    c.run.out_dir = "runs/sft_twenty_questions_answerer"
