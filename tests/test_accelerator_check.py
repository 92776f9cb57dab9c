"""tools/accelerator_check.py runs on CPU at small sizes (so it cannot rot between lent accelerators) and keeps
the other devices' sections of its report."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_accelerator_check_writes_a_report_on_cpu(tmp_path):
    out = tmp_path / "accelerators.md"
    out.write_text("# Accelerators\n\nintro\n\n## NVIDIA H100 80GB HBM3\n\nkept figures\n")
    p = subprocess.run([sys.executable, "tools/accelerator_check.py", "--small", "--tests", "cudnn_on_cpu",
                        "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = out.read_text()
    assert "## NVIDIA H100 80GB HBM3\n\nkept figures" in report and report.startswith("# Accelerators")
    cpu = report.split("## CPU: ")[1]
    assert "small sizes (CPU)" in cpu
    assert "1 passed" in cpu  # the correctness step's pytest summary
    assert "| xla" in cpu  # the attention tables
    assert "MFU rollout" in cpu and "tiny:" in cpu  # the update's split and MFU
