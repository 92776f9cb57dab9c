"""Train the games' byte-level BPE tokenizer and write it as a Hugging Face folder.

    .venv/bin/python tools/train_tokenizer.py                      # -> jaxmarl_llm/assets/games_bpe (GAMES_BPE)
    .venv/bin/python tools/train_tokenizer.py --vocab_size=2048 --out=/tmp/my_bpe --envs=text/tic_tac_toe

The corpus is every text the games write when they are built, at their default settings (prompts, board
pictures, feedback, the replies they accept: `train/lm/setup.env_texts`). The tokenizer is Qwen2's kind
(`tokenizers.train_bpe`): byte-level, each digit its own token, <|endoftext|> ending a reply. A config points
at the folder (`config.tokenizer`) and `HFTokenizer` loads it, as it loads a checkpoint's tokenizer.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jaxmarl_llm.tokenizers import GAMES_BPE, HFTokenizer, train_bpe  # noqa: E402
from jaxmarl_llm.train.lm.setup import env_texts  # noqa: E402

GAMES = ("text/tic_tac_toe", "text/guess_number", "text/twenty_questions")
VOCAB_SIZE = 1024


def corpus(envs=GAMES) -> list[str]:
    return [text for name in envs for text in env_texts(name, {})]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(GAMES), help="comma-separated env names")
    parser.add_argument("--vocab_size", type=int, default=VOCAB_SIZE)
    parser.add_argument("--out", default=GAMES_BPE, help="the folder to write")
    args = parser.parse_args(argv)
    try:
        texts = corpus(tuple(e for e in args.envs.split(",") if e))
    except (KeyError, ValueError) as e:
        print(f"Error: --envs: {e}", file=sys.stderr)
        return 2
    if args.vocab_size < 256 + 3:
        print(f"Error: --vocab_size={args.vocab_size}: a byte-level BPE needs at least 259 ids (256 bytes, 3 specials)",
              file=sys.stderr)
        return 2
    train_bpe(texts, args.out, args.vocab_size)
    tok = HFTokenizer(args.out)
    print(f"{args.out}: {tok.vocab_size} ids from {len(texts)} texts; 'Move: 5' -> {tok.encode('Move: 5')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
