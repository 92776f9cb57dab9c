"""Whole LM-RL training iterations on tic-tac-toe self-play: ours (one compiled program) vs a PyTorch loop.

    python bench/llm_rollout.py                      # 16 games per iteration, 3 timed iterations each side
    python bench/llm_rollout.py --games 32 --iters 5
    python bench/llm_rollout.py --model runs/sft_tic_tac_toe_polish/model   # the SFT model: 9-move games

Same tiny random Qwen3 (built with `transformers`, saved as safetensors, loaded
by `jaxmarl_llm.models.hf`), same tokenizer and board pictures as configs/tic_tac_toe.py
(word pieces, `X5`-tagged boards), same prompts and rules.
One iteration = play `--games` games of self-play (learner vs a frozen snapshot,
learner's seat drawn per group of 8) to the end, then one GRPO step on the
learner's tokens (rank-16 LoRA on all projections, Adam): on our side the config's
4 epochs x 4 minibatches become 1 x 1, so both sides take one step per iteration.

  ours:  configs/tic_tac_toe.py through `mesh.sharded_chunk`: rollout (prefill + decode
         scan per turn), advantages and the update in one XLA program, `--iters` updates per call.
  peer:  the way service recipes do it: Python game objects, a string transcript per seat,
         `tokenizer` -> `model.generate` (batched over the games waiting for that model) per turn,
         regex parsing, then a PyTorch GRPO step with a `peft` LoRA on the same tokens.

Reported: iterations/s, env turns/s (moves played) and generated tokens/s (the
movers' tokens), and the ratio. A random model mostly writes an illegal first
move, so most games end after one or two turns on both sides; the numbers count
what was actually played; `--model` takes a local HF folder instead (e.g. the tic-tac-toe
SFT model, whose games run to the end). Everything runs on this machine's CPU in one process.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from configs.tic_tac_toe import get_config  # noqa: E402
from jaxmarl_llm.envs.text import tic_tac_toe as ttt  # noqa: E402
from jaxmarl_llm.train.lm.setup import build_tokenizer  # noqa: E402

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


# ---- ours -----------------------------------------------------------------------------------------
def bench_ours(model_dir: str, games: int, iters: int) -> dict:
    from jaxmarl_llm.train import lm_rl
    from jaxmarl_llm.parallel import mesh as mesh_lib
    from jaxmarl_llm.train.config import validate_lm_rl

    c = get_config()
    c.model.checkpoint = model_dir
    c.num_envs, c.mesh.num_devices = games, 1
    c.kl_coef = 0.0  # the peer's GRPO step has no KL term: the same work on both sides
    c.update_epochs = c.num_minibatches = 1  # and it takes one step over all the games (the config: 4 x 4)
    validate_lm_rl(c)
    trainer = lm_rl.make_train(c)
    mesh = mesh_lib.make_mesh(1)
    state = mesh_lib.put(trainer.init(jax.random.PRNGKey(0), trainer.hparams), mesh, trainer.state_specs)
    chunk = mesh_lib.sharded_chunk(trainer, mesh, iters)
    t0 = time.perf_counter()
    state, _ = chunk(state, trainer.hparams)
    jax.block_until_ready(state)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    state, m = chunk(state, trainer.hparams)
    jax.block_until_ready(m)
    seconds = time.perf_counter() - t0
    m = jax.device_get(m)
    turns = float(np.sum(m["episode_turns"])) * games
    # tokens_per_turn is over the learner's turns; the snapshot's moves are the same kind of reply
    tokens = float(np.sum(m["episode_turns"] * m["tokens_per_turn"])) * games
    return dict(side="ours (JAX, one program)", iters=iters / seconds, turns=turns / seconds, tokens=tokens / seconds,
                compile_s=compile_s, mean_turns=turns / (iters * games))


# ---- peer: a Python game loop around transformers.generate + a PyTorch GRPO step ----------------
class Game:
    """One tic-tac-toe game as strings, the same text our env builds."""

    def __init__(self, style: str):
        self.style = style
        empty = ttt.board_picture((0,) * 9, style)
        self.board = [0] * 9
        self.text = [ttt.PROMPT.format(mark=m) + empty + ttt.STATUS[s] for m, s in (("X", ttt.YOUR_MOVE), ("O", ttt.THEIR_MOVE))]
        self.mover, self.done, self.ret = 0, False, [0.0, 0.0]

    def play(self, reply: str) -> None:
        me = self.mover
        hit = re.search(r"move[\s:=]*(\d{1,2})", reply.lower())
        cell = int(hit.group(1)) - 1 if hit else -1
        for a in (0, 1):
            self.text[a] += reply if a == me else ""
        if not 0 <= cell < 9 or self.board[cell]:
            self.done = True
            self.ret[me] = -2.0
            for a in (0, 1):
                self.text[a] += "\n" + ttt.STATUS[ttt.ILLEGAL_YOU if a == me else ttt.ILLEGAL_THEM]
            return
        self.board[cell] = me + 1
        for a in (0, 1):
            self.text[a] += ttt.board_picture(self.board, self.style) + ttt.STATUS[ttt.status_after(self.board, a)]
        w = ttt._py_winner(self.board)
        if w:
            self.ret[me], self.ret[1 - me] = 1.0, -1.0
        self.done = bool(w) or all(self.board)
        self.mover = 1 - me


def bench_torch(model_dir: str, games: int, iters: int, group: int = 8, attn: str = "sdpa") -> dict:
    import peft
    import torch
    import transformers

    config = get_config()
    tok, style = _tokenizer(), config.env_kwargs.get("board", "grid")
    base = transformers.AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation=attn).float()
    learner = peft.get_peft_model(base, peft.LoraConfig(r=16, lora_alpha=32, target_modules=list(TARGETS), lora_dropout=0.0))
    snapshot = copy.deepcopy(learner).eval()  # the pool's frozen opponent
    for p in snapshot.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam([p for p in learner.parameters() if p.requires_grad], lr=3e-3, eps=1e-5)
    gen_kw = dict(max_new_tokens=8, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, eos_token_id=tok.eos_id,
                  pad_token_id=tok.pad_id)
    rng = np.random.default_rng(0)

    def generate(model, prompts: list[str]) -> list[list[int]]:
        ids = [tok.encode(p) for p in prompts]
        width = max(map(len, ids))
        batch = torch.tensor([[tok.pad_id] * (width - len(i)) + i for i in ids])  # left padding
        mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids])
        with torch.no_grad():
            out = model.generate(input_ids=batch, attention_mask=mask, **gen_kw)[:, width:].tolist()
        return [row[: row.index(tok.eos_id) + 1] if tok.eos_id in row else [t for t in row if t != tok.pad_id]
                for row in out]

    def iteration() -> tuple[int, int]:
        gs = [Game(style) for _ in range(games)]
        seat = np.repeat(rng.integers(0, 2, games // group), group)
        samples, turns, tokens = [], 0, 0  # (game, prompt ids, reply ids)
        while any(not g.done for g in gs):
            for model, mine in ((learner, True), (snapshot, False)):
                idx = [i for i, g in enumerate(gs) if not g.done and (g.mover == seat[i]) == mine]
                if not idx:
                    continue
                prompts = [gs[i].text[gs[i].mover] for i in idx]
                replies = generate(model, prompts)
                for i, p, r in zip(idx, prompts, replies):
                    if mine:
                        samples.append((i, tok.encode(p), r))
                    gs[i].play(tok.decode(r))
                turns += len(idx)
                tokens += sum(map(len, replies))
        # GRPO: group-normalized learner returns, sequence-mean token log-prob loss
        ret = np.array([g.ret[seat[i]] for i, g in enumerate(gs)]).reshape(-1, group)
        adv = ((ret - ret.mean(1, keepdims=True)) / (ret.std(1, keepdims=True) + 1e-6)).reshape(-1)
        if not samples:  # every learner seat was O and every snapshot X moved illegally: nothing to learn
            return turns, tokens
        seqs = [p + r for _, p, r in samples]
        width = max(map(len, seqs))
        batch = torch.tensor([s + [tok.pad_id] * (width - len(s)) for s in seqs])
        resp = torch.zeros(batch.shape, dtype=torch.bool)
        for j, (_, p, r) in enumerate(samples):
            resp[j, len(p): len(p) + len(r)] = True
        attn = (torch.arange(width)[None] < torch.tensor([len(s) for s in seqs])[:, None]).long()
        logits = learner(input_ids=batch, attention_mask=attn).logits
        lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, batch[:, 1:, None])[..., 0]
        m = resp[:, 1:].float()
        a = torch.tensor([adv[i] for i, _, _ in samples], dtype=torch.float32)
        loss = -((lp * m).sum(1) / m.sum(1).clamp(min=1) * a).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(learner.parameters(), 1.0)
        opt.step()
        return turns, tokens

    iteration()  # warm-up
    t0 = time.perf_counter()
    turns = tokens = 0
    for _ in range(iters):
        t, k = iteration()
        turns, tokens = turns + t, tokens + k
    seconds = time.perf_counter() - t0
    return dict(side="PyTorch + transformers.generate loop", iters=iters / seconds, turns=turns / seconds,
                tokens=tokens / seconds, compile_s=0.0, mean_turns=turns / (iters * games))


def _tokenizer():
    c = get_config()
    return build_tokenizer(c.tokenizer, c.env_name, c.env_kwargs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", type=int, default=16)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--peer-attn", default="sdpa", choices=["sdpa", "eager"],
                    help="the peer's attention (transformers' default sdpa: 1.35x eager's iterations on this game)")
    ap.add_argument("--model", default="", help="local HF folder (configs/tic_tac_toe.py's tokenizer); default: a random tiny Qwen3")
    args = ap.parse_args()
    import torch

    print(f"jax {jax.__version__} ({jax.devices()[0].platform}), torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
    from jaxmarl_llm.models.testing import build_hf_model

    with tempfile.TemporaryDirectory() as path:
        if args.model:
            path = args.model
        else:
            build_hf_model("qwen3", path, vocab_size=_tokenizer().vocab_size, max_position_embeddings=1024)
        # the peer at its best thread count (torch's 2-thread ops suffer most when a core is shared)
        peers = []
        for threads in sorted({1, os.cpu_count() or 1}):
            torch.set_num_threads(threads)
            peers.append(bench_torch(path, args.games, args.iters, attn=args.peer_attn))
            peers[-1]["side"] += f" ({threads} thread{'s' if threads > 1 else ''}, {args.peer_attn})"
            print(peers[-1], flush=True)
        rows = [max(peers, key=lambda r: r["iters"])]
        rows.append(bench_ours(path, args.games, args.iters))
        print(rows[-1], flush=True)
    lines = ["| side | iterations/s | env turns/s | generated tokens/s | turns per game | compile s |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['side']} | {r['iters']:.3f} | {r['turns']:.1f} | {r['tokens']:.1f} | {r['mean_turns']:.2f} | "
              f"{r['compile_s']:.1f} |" for r in rows]
    print("\n" + "\n".join(lines))
    print(f"\nratio ours / peer: iterations {rows[1]['iters'] / rows[0]['iters']:.2f}x, "
          f"turns {rows[1]['turns'] / rows[0]['turns']:.2f}x, tokens {rows[1]['tokens'] / rows[0]['tokens']:.2f}x")


if __name__ == "__main__":
    main()
