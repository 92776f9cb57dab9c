"""Check the accelerator this machine has and write what it measured to docs/accelerators.md.

    bash tools/accelerator_check.sh                 # everything, at the accelerator's sizes
    bash tools/accelerator_check.sh --small         # CPU-sized figures (what the test suite runs)

Steps, each a command of its own (its output kept in the report):
  1. the attention correctness grid, tests/test_attention_kernels.py, compiled on the device (pallas, cudnn
     against xla; on CPU the Pallas kernels run in interpret mode and cudnn is skipped: said in the report);
  2. bench/attention.py: prefill forward and forward + backward, decode tokens/s (Qwen3-0.6B heads, bf16);
  3. bench/lm_update.py: one LM RL update at the tiny model and at qwen3-0.6b in bf16 (on CPU, `--small`: the
     tiny model only), split into rollout / scoring / backward, with its MFU.
The report replaces this device kind's section of --out and keeps the other devices' sections.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ)  # as this process was started, before device() touches it
HEADER = "# Accelerators\n\nWhat `bash tools/accelerator_check.sh` measured, one section per device kind (newest run).\n"


def device() -> tuple[str, str, int]:
    # this process only looks: it must not take the accelerator's memory from the steps it launches
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    import jax

    d = jax.devices()
    kind = d[0].device_kind
    if d[0].platform == "cpu":  # XLA names every CPU "cpu": the model and the cores say which
        model = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")]
        kind = f"CPU: {model[0] if model else 'unknown model'}, {os.cpu_count()} cores"
    return d[0].platform, kind, len(d)


def step_env(platform: str) -> dict[str, str]:
    """The environment of each step: on an accelerator, pinned to it (tests/conftest.py would otherwise pin the
    tests to the CPU and force its CPU-only XLA flags), its memory the step's own."""
    env = dict(ENV)
    if platform != "cpu":
        env.setdefault("JAX_PLATFORMS", "")  # jax picks the accelerator; io_callback still finds the CPU
        env.setdefault("XLA_FLAGS", "")
    return env


def run(cmd: list[str], timeout: int, env: dict[str, str]) -> tuple[int, str, float]:
    """(exit status, combined output, seconds) of one step, run from the repository root."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as err:
        text = [s.decode(errors="replace") if isinstance(s, bytes) else s or "" for s in (err.stdout, err.stderr)]
        out, rc = f"{text[0]}{text[1]}\ntimed out after {timeout} s", 124
    return rc, out, time.perf_counter() - t0


def keep(output: str, pattern: str) -> str:
    """The lines of `output` a reader needs (matching `pattern`), warnings dropped."""
    return "\n".join(line for line in output.splitlines() if re.search(pattern, line) and "Warning" not in line)


def steps(platform: str, small: bool, tests: str, big_grid: bool) -> list[tuple[str, list[str], str]]:
    """(title, command, lines to keep) of each step."""
    py = sys.executable
    pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_attention_kernels.py"]
    if tests:
        pytest += ["-k", tests]
    if big_grid:
        pytest += ["-m", ""]  # the slow-marked big grid too
    attention = [py, "bench/attention.py", "--repeats", "3"]
    update = [py, "bench/lm_update.py", "--repeats", "2"]
    if small or platform == "cpu":
        attention += ["--lengths", "128,256", "--tokens", "512", "--decode-batches", "1,8", "--context", "256"]
        update += ["--shapes", "tiny"]
    else:
        update += ["--num_envs", "32"]
    return [
        ("Attention correctness grid (tests/test_attention_kernels.py)", pytest,
         r"passed|failed|error|skipped|^FAILED|^ERROR|Max absolute difference|Error: \S"),
        ("Attention kernels (bench/attention.py)", attention, r"^\||jax |timing"),
        ("One LM RL update (bench/lm_update.py)", update, r"params|envs"),
    ]


def section(kind: str, platform: str, count: int, small: bool, results: list[tuple[str, list[str], int, str, float]]):
    import jax

    lines = [f"## {kind}", "", f"{count} x {kind} ({platform}), jax {jax.__version__}, {time.strftime('%Y-%m-%d')}"
             + (" — small sizes (CPU): the accelerator figures need an accelerator" if small or platform == "cpu"
                else ""), ""]
    for title, cmd, rc, text, seconds in results:
        shown = " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd[1:])
        lines += [f"### {title}", "", f"`python {shown}`: exit {rc}, {seconds:.0f} s", "", "```", text.strip(),
                  "```", ""]
    return "\n".join(lines)


def write(out: str, kind: str, body: str) -> None:
    """Replace `kind`'s section of `out` (or add it), keep the others."""
    old = open(out).read() if os.path.exists(out) else HEADER
    parts = re.split(r"(?m)^(?=## )", old)
    kept = [p for p in parts[1:] if not p.startswith(f"## {kind}\n")]
    with open(out, "w") as f:
        f.write(parts[0].rstrip() + "\n\n" + "\n".join([body] + [p.rstrip() + "\n" for p in kept]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="CPU-sized figures (also the default on a CPU)")
    ap.add_argument("--tests", default="", help="pytest -k expression for the correctness grid (default: all)")
    ap.add_argument("--big-grid", action="store_true", help="also the slow-marked big grid of attention shapes")
    ap.add_argument("--logs", default="", help="a folder to keep each step's whole output in")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds each step may run")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "accelerators.md"))
    args = ap.parse_args(argv)
    platform, kind, count = device()
    print(f"checking {count} x {kind} ({platform})", flush=True)
    results = []
    env = step_env(platform)
    for title, cmd, pattern in steps(platform, args.small, args.tests, args.big_grid):
        rc, output, seconds = run(cmd, args.timeout, env)
        text = keep(output, pattern) or output[-2000:]
        if args.logs:
            os.makedirs(args.logs, exist_ok=True)
            with open(os.path.join(args.logs, f"step{len(results) + 1}.log"), "w") as f:
                f.write(output)
        if rc:  # what went wrong, in full, on the console (the report keeps the matching lines)
            print(output[-6000:], flush=True)
        print(f"{title}: exit {rc}, {seconds:.0f} s\n{text}", flush=True)
        results.append((title, cmd, rc, text, seconds))
    write(args.out, kind, section(kind, platform, count, args.small, results))
    print(f"wrote {args.out}")
    return max(rc for _, _, rc, _, _ in results)


if __name__ == "__main__":
    sys.exit(main())
