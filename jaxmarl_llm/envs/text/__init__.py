"""Token games: text environments whose agents are language models.

Turn protocol (every game):

    obs, state = env.reset(key)               # obs: TextObs(tokens [A, L], length [A])
    while not done:
        active = env.active(state)            # bool [A]: who moves (turn-based games: one agent)
        # each active agent's policy gets its transcript obs.tokens[a, :obs.length[a]] as the prompt
        # and generates up to M tokens:
        action = TextAction(tokens [A, M], length [A])   # rows of inactive agents are ignored
        obs, state, reward, terminated, truncated, info = env.step(key, state, action)

- The env appends the active agent's action (cut at the first eos) to its own
  transcript, then the feedback (answers, board, the other agents' moves) to
  every transcript that should see it, so the next prompt is ready.
- Actions are parsed inside `jit` over token ids with any tokenizer; a
  malformed action is a format error (`info["format_error"]`), never a crash.
- A transcript that would pass its capacity L is cut and the episode is
  truncated (`truncated=True`). A finished episode is absorbing; wrap with
  `core.AutoReset` / `core.wrap_for_training` for training.
- Strings (prompts, feedback, word lists, board pictures) are encoded once
  when the env is built; pass `tokenizer=` (default: `CharTokenizer()`), e.g.
  an `HFTokenizer` from a local folder.
- `env.render(state)` (or `render.transcripts(tokenizer, state, index)`)
  gives each agent's readable transcript; `env.random_action(key, state)` a
  well-formed (legal) random action for tests and benchmarks.

Games: guess_number, twenty_questions, tic_tac_toe, poker (kuhn_poker,
leduc_poker), negotiation, debate, cooperative_writing, arithmetic,
tokenized_mpe (see each module); mixture puts several games in one env,
one drawn per episode.
"""

from jaxmarl_llm.envs.text.buffers import TextAction, TextObs

__all__ = ["TextAction", "TextObs"]
