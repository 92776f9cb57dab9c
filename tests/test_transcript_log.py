"""A run's sampled episodes: transcripts.jsonl, TensorBoard's text tab, transcripts.html (read in headless Chromium),
and the optional Weights & Biases log (offline).

Tiny tic-tac-toe runs (tests/test_selfplay.py's model) against the league of built-in players, every episode of
an update sampled (transcript_episodes = num_envs), so the transcripts can be checked against the update's own
metrics: they are the episodes the update learned from, not a replay.
"""

import glob
import json
import os
import struct

import numpy as np
import pytest

from jaxmarl_llm.parallel.mesh import sharded_chunk
from jaxmarl_llm.run import entry, runner, trainers
from jaxmarl_llm.run.metrics_log import read_csv
from jaxmarl_llm.run.transcript_log import JSONL, PAGE, due, markdown, read_records
from jaxmarl_llm.run.transcript_page import write_page
from jaxmarl_llm.train import lm_rl
from jaxmarl_llm.train.config import ConfigError, validate_lm_rl
from killing import Killed, dying_after
from test_selfplay import _config

UPDATES, ENVS = 6, 4


def _run_config(out_dir, **run):
    c = _config(total_episodes=ENVS * UPDATES, opponent_pool={"size": 1, "random": 0.5, "minimax": 0.5})
    c.run.update(out_dir=str(out_dir), transcripts_every=2, transcript_episodes=ENVS, updates_per_chunk=3,
                 checkpoint_every=1, progress=False, plot=False, **run)
    validate_lm_rl(c)
    return c


@pytest.fixture(scope="module")
def league_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("transcripts") / "run"
    result = entry.train_from_config(_run_config(out))
    return str(out), result


def test_due_updates():
    assert [u for u in range(1, 11) if due(u, 4)] == [1, 4, 8]
    assert not any(due(u, 0) for u in range(1, 5))


def test_transcripts_are_the_updates_own_episodes(league_run):
    """Update 1 and every 2nd: all of its ENVS episodes, whose learner returns average to the update's
    episode_return and whose learner turns give its format_error_rate; each turn's reward adds up to its seat's
    return; the built-in players' replies carry no log-prob, the learner's a finite negative one and a value;
    every reply is echoed in its seat's transcript."""
    out, _ = league_run
    records = read_records(os.path.join(out, JSONL))
    rows = {int(float(r["update"])): r for r in read_csv(os.path.join(out, "metrics.csv"))}
    assert sorted({r["update"] for r in records}) == [1, 2, 4, 6]
    for update in (1, 2, 4, 6):
        eps = [r for r in records if r["update"] == update]
        assert [r["episode"] for r in eps] == list(range(ENVS))
        learner = [s for r in eps for s in r["seats"] if s["player"] == "learner"]
        assert len(learner) == ENVS  # one learner seat per game, the other a built-in player
        assert np.mean([s["return"] for s in learner]) == pytest.approx(float(rows[update]["episode_return"]), abs=1e-6)
        turns = [t for r in eps for t in r["turns"] if r["seats"][t["seat"]]["player"] == "learner"]
        errors = np.mean([t["format_error"] for t in turns])
        assert errors == pytest.approx(float(rows[update]["format_error_rate"]), abs=1e-6)
    for r in records:
        assert {s["player"] for s in r["seats"]} - {"learner"} <= {"random", "minimax"}
        for s in r["seats"]:
            assert sum(t["reward"] for t in r["turns"] if t["seat"] == s["seat"]) == pytest.approx(s["return"])
        for t in r["turns"]:
            seat = r["seats"][t["seat"]]
            assert t["reply"] in seat["text"]
            if seat["player"] == "learner":
                assert t["logprob"] < 0 and np.isfinite(t["value"])
            else:
                assert t["logprob"] is None and t["value"] is None and t["reply"].startswith("Move: ")


def _tfrecords(path: str):
    """The records of a TensorBoard event file (TFRecord framing: length, its crc, data, its crc)."""
    data = open(path, "rb").read()
    pos = 0
    while pos + 12 <= len(data):
        (n,) = struct.unpack("<Q", data[pos:pos + 8])
        yield data[pos + 12:pos + 12 + n]
        pos += 12 + n + 4


def test_tensorboard_text_tab_holds_each_due_updates_table(league_run):
    from tensorboardX.proto import event_pb2

    out, _ = league_run
    texts = {}
    for path in glob.glob(os.path.join(out, "tb", "events.*")):
        for raw in _tfrecords(path):
            event = event_pb2.Event.FromString(raw)
            for value in event.summary.value:
                if value.tag.startswith("transcripts"):
                    texts[event.step] = value.tensor.string_val[0].decode()
    steps = ENVS * 3  # env_steps per update: num_envs x num_turns
    assert sorted(texts) == [u * steps for u in (1, 2, 4, 6)]
    records = [r for r in read_records(os.path.join(out, JSONL)) if r["update"] == 6]
    assert texts[6 * steps] == markdown(records)
    assert "| turn | seat | reply | reward | log-prob | value |" in texts[6 * steps]


def test_markdown_escapes_table_breakers():
    record = {"update": 1, "episode": 0, "seats": [{"seat": 0, "name": "x", "player": "learner", "return": 1.0}],
              "turns": [{"turn": 0, "seat": 0, "name": "x", "reply": "a|b\nc", "reward": 1.0, "logprob": -0.5,
                         "value": 0.1}]}
    line = markdown([record]).splitlines()[-1]
    assert line == "| 0 | x | `a\\|b c` | +1 | -0.5 | 0.1 |"


def test_a_killed_run_resumes_to_the_same_transcripts(tmp_path):
    """Killed after its first chunk (updates 1-3 saved, 1 and 2 written) and resumed: the same transcripts.jsonl
    as an uninterrupted run, a line torn by the kill dropped."""
    def run(out, chunk_fn, resume=""):
        c = _run_config(out)
        c.resume = resume
        trainer = lm_rl.make_train(c)
        return runner.run_training(c, trainer, chunk_fn, ENVS * 3, "episode_return",
                                   describe=trainers._lm_transcripts(c, trainer))

    run(tmp_path / "full", sharded_chunk)
    with pytest.raises(Killed):
        run(tmp_path / "killed", dying_after(sharded_chunk, 2))
    with open(tmp_path / "killed" / JSONL, "a") as f:
        f.write('{"update": 4, "episo')  # the kill tore a line
    run(tmp_path / "killed", sharded_chunk, resume="True")
    full = (tmp_path / "full" / JSONL).read_text()
    assert (tmp_path / "killed" / JSONL).read_text() == full
    assert (tmp_path / "killed" / PAGE).read_text() == (tmp_path / "full" / PAGE).read_text().replace(
        "full, seed", "killed, seed")


def test_transcript_counts_are_checked():
    for key, value in (("transcripts_every", -1), ("transcript_episodes", -3)):
        c = _config()
        c.run[key] = value
        with pytest.raises(ConfigError, match=f"config.run.{key}: must be a count"):
            validate_lm_rl(c)


# ---- the page, in a browser ----------------------------------------------------------------------

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through Selenium (tools/setup.sh installs Debian's chromium and chromium-driver)."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} / {CHROMEDRIVER} missing: tools/setup.sh installs them")
        pytest.skip("no headless Chromium here (tools/setup.sh installs it)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _visible(driver):
    from selenium.webdriver.common.by import By

    return [c for c in driver.find_elements(By.CSS_SELECTOR, ".card") if c.is_displayed()]


def _filter(driver, field: str, text: str):
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, field)
    box.clear()
    if text:
        box.send_keys(text)
    else:  # clear() sends no input event
        driver.execute_script("arguments[0].dispatchEvent(new Event('input'))", box)


def test_page_shows_every_episode_and_filters_by_update_and_text(league_run, browser):
    from selenium.webdriver.common.by import By

    out, _ = league_run
    records = read_records(os.path.join(out, JSONL))
    browser.get("file://" + os.path.join(out, PAGE))
    cards = _visible(browser)
    assert len(cards) == len(records) == 4 * ENVS
    assert [int(c.get_attribute("data-update")) for c in cards][:ENVS] == [6] * ENVS  # newest first
    assert browser.find_element(By.ID, "shown").text == f"{len(records)} of {len(records)} episodes"
    _filter(browser, "update-filter", "2")
    assert {int(c.get_attribute("data-update")) for c in _visible(browser)} == {2}
    assert len(_visible(browser)) == ENVS
    _filter(browser, "update-filter", "2-4")
    assert len(_visible(browser)) == 2 * ENVS
    _filter(browser, "update-filter", ">=4")
    assert {int(c.get_attribute("data-update")) for c in _visible(browser)} == {4, 6}
    _filter(browser, "update-filter", "")
    _filter(browser, "text-filter", "minimax")
    with_minimax = [r for r in records if any(s["player"] == "minimax" for s in r["seats"])]
    assert 0 < len(_visible(browser)) == len(with_minimax) < len(records)
    assert browser.find_element(By.ID, "shown").text == f"{len(with_minimax)} of {len(records)} episodes"
    # each seat in its own colour: transcript borders and turn rows
    first = browser.find_element(By.CSS_SELECTOR, ".card")
    colour = lambda css: first.find_element(By.CSS_SELECTOR, css).value_of_css_property("border-left-color")  # noqa: E731
    assert colour(".seat-0") != colour(".seat-1")
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


def test_page_shows_markup_in_replies_as_text(tmp_path, browser):
    """A reply is the model's free text: markup in it is shown, never run."""
    from selenium.webdriver.common.by import By

    reply = "</pre><script>document.title='pwned'</script><b>x</b>"
    record = {"update": 3, "episode": 0, "transcript": "whole",
              "seats": [{"seat": 0, "name": "x", "player": "learner", "return": -2.0, "text": "board\n" + reply}],
              "turns": [{"turn": 0, "seat": 0, "name": "x", "reply": reply, "reward": -2.0, "logprob": -3.0,
                         "value": 0.5, "format_error": True}]}
    path = str(tmp_path / PAGE)
    write_page(path, [record], "t")
    browser.get("file://" + path)
    assert browser.title == "t: sampled episodes"
    assert browser.find_element(By.CSS_SELECTOR, "code").text == reply
    assert "(unparsable)" in browser.find_element(By.CSS_SELECTOR, "tr.format-error").text


# ---- Weights & Biases, offline ------------------------------------------------------------------


def _wandb_records(path: str) -> list:
    """The protobuf records of a W&B run file (`run-<id>.wandb`: a 7-byte header, then 32 KiB blocks of records,
    each a 7-byte header (crc, length, type: 1 whole, 2 first, 3 middle, 4 last) and its bytes)."""
    from wandb.proto import wandb_internal_pb2

    data, pos, block, out, part = open(path, "rb").read(), 7, 32768, [], b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if n == 0 and kind == 0:
            break
        part, pos = part + data[pos + 7:pos + 7 + n], pos + 7 + n
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(part)
            out.append(record)
            part = b""
    return out


def _history(run_dir: str) -> dict[int, dict]:
    rows = {}
    for path in glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb")):
        for record in _wandb_records(path):
            if record.WhichOneof("record_type") == "history":
                row = {item.key or "/".join(item.nested_key): json.loads(item.value_json)
                       for item in record.history.item}
                if "_step" in row:
                    rows.setdefault(row["_step"], {}).update(row)
    return rows


def test_wandb_offline_logs_the_rows_and_a_resume_continues_the_run(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)  # "auto": offline, no network
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "wb"
    c = _run_config(out, wandb=True)
    c.total_episodes = ENVS * 3
    entry.train_from_config(c)
    run_id = (out / "wandb_run_id").read_text().strip()
    assert glob.glob(str(out / "wandb" / f"offline-run-*-{run_id}"))
    c.total_episodes, c.resume, c.resume_force = ENVS * UPDATES, "True", True  # three more updates
    entry.train_from_config(c)
    assert len(glob.glob(str(out / "wandb" / f"offline-run-*-{run_id}"))) == 2  # the same W&B run, continued
    history = _history(str(out))
    rows = read_csv(str(out / "metrics.csv"))
    assert sorted(history) == [int(r["update"]) for r in rows] == list(range(1, UPDATES + 1))
    for r in rows:
        got = history[int(r["update"])]
        for name in ("episode_return", "format_error_rate", "env_steps"):
            assert got[name] == pytest.approx(float(r[name]))
    assert {u for u, row in history.items() if row.get("transcripts/_type") == "html-file"} == {1, 2, 4, 6}


def test_wandb_without_the_package_is_one_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    c = _config()
    c.run.wandb = True
    with pytest.raises(ConfigError, match="config.run.wandb: True needs the wandb package"):
        validate_lm_rl(c)
    c.run.wandb, c.run.wandb_mode = False, "cloud"
    with pytest.raises(ConfigError, match="config.run.wandb_mode: must be one of auto, online, offline"):
        validate_lm_rl(c)

