"""SFT a tiny from-scratch model on greedy-splitter transcripts: the warm start for configs/twenty_questions.py.

    .venv/bin/python experiments/train.py --config=configs/sft_twenty_questions.py            # questioner
    .venv/bin/python experiments/train.py --config=configs/sft_twenty_questions.py:lm         # both seats
    .venv/bin/python experiments/train.py --config=configs/sft_twenty_questions.py:answerer   # answerer only

Teacher: jaxmarl_llm/data/teachers.py `greedy_splitter` asks the question that splits the words still possible
most evenly (first on ties: one deterministic tree) and guesses on the last of 8 turns; it solves 68.4% of the
187 words (7 questions certify at most 128). No exploration noise (`script_noise=0`: off-tree states would add
to what the student memorises); evaluation plays every word once (no held-out split). Every weight trains;
char tokenizer, hidden 64, 2 layers. Measured on 2 CPU cores shared with other jobs, seed 0:
  * default (`:oracle`, -> runs/sft_twenty_questions/model): the questioner against the oracle, capacity 864,
    500 updates (30 min, peak RSS 7.7 GB): move accuracy ~1.0, greedy 58.3% solved (109/187), 0% format errors.
  * `:lm` (-> runs/sft_twenty_questions_lm/model): both seats of the game with an LM answerer (seat 1 replies the
    oracle's truth), one model learning both roles (`move_accuracy_questioner` / `move_accuracy_answerer`),
    capacity 384, 1500 updates (20 min, peak RSS 2.9 GB): greedy in both seats 67.4% solved (126/187), answers
    99.5% right (1303/1309).
  * `:answerer` (-> runs/sft_twenty_questions_answerer/model): the answerer seat alone (`target_agents=(1,)`) on
    random questions true half the time (`script_noise=1`, `explore="balanced"`), whole-word tokens, 4000
    updates x 32 (26 min): answer accuracy 0.71 -> 0.95, 92% on the RL questioner's questions. It is the frozen
    answerer of configs/twenty_questions.py:lm_scratch.
Then RL: configs/twenty_questions.py (`--config.model.checkpoint=<the model above> --config.eval_episodes=187`).
Options: `--config.total_episodes`, `--config.lr`, `--config.script_noise`.
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
    c.total_episodes = 16 * 500  # move accuracy ~1.0 at the end; 400 updates give 31% success
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
    # (word, question) -> yes/no; spelled in characters the tiny model settles on "always No"
    c.tokenizer = "word"
    # questioner: prompt 80 + 8 x (a 4-token reply + feedback <= 10) <= 192; every reply is 4 tokens at most
    c.env_kwargs.update({"capacity": 208, "max_action_tokens": 8})
    c.model.max_position_embeddings = 256
    c.num_envs = 32
    c.total_episodes = 32 * 4000  # ~1.3 k (question, word) lookups a seen 100+ times each; ~9.5 min
    c.script_noise = 1.0  # every question random: the answerer meets all 60 x 187 (question, word) pairs
    c.script_kwargs = {"explore": "balanced"}  # ... half of them true: uniform questions teach "always No" (88%)
    c.run.out_dir = "runs/sft_twenty_questions_answerer"
