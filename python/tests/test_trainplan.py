"""The Python package against the binary: each call's JSON byte for byte as the command line
prints it, its errors as the command line's one-line message, Ctrl-C during a long search.

The binary is `$TRAINPLAN_BIN`, else `target/release/trainplan` (or `target/debug/`) of the
checkout; without one the comparisons are skipped, saying so.
"""

import _thread
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import trainplan

ROOT = Path(__file__).resolve().parents[2]


def _binary():
    given = os.environ.get("TRAINPLAN_BIN")
    if given:
        return given
    for profile in ("release", "debug"):
        path = ROOT / "target" / profile / "trainplan"
        if path.is_file():
            return str(path)
    return None


BIN = _binary()
needs_bin = pytest.mark.skipif(
    BIN is None,
    reason="no trainplan binary: set TRAINPLAN_BIN or run `cargo build --release` at the root",
)


def cli(args):
    """The binary's (stdout, stderr, exit status) for `args` (program name first)."""
    done = subprocess.run([BIN, *args[1:]], capture_output=True, check=False)
    return done.stdout.decode("utf-8"), done.stderr.decode("utf-8"), done.returncode


CALLS = [
    ("search", {}),
    (
        "search",
        {
            "models": ["70b", "405b"],
            "gpus": 1536,
            "max_days": 45.5,
            "rank": "days",
            "top": 3,
            "memory": "detailed",
            "time": "detailed",
        },
    ),
    ("search", {"gpus": 1024, "loss_target": 1.9}),  # no plan passes: exit status 1
    ("check", {"model": "70b", "tokens": 4.96e12, "tp": 8, "pp": 1, "zero": 3}),
    ("check", {"model": "70b", "tokens": 15e12, "tp": 1, "pp": 1, "zero": 0}),  # fails
    (
        "check",
        {
            "model": "70b",
            "tokens": 4960000000000,
            "tp": 8,
            "pp": 2,
            "zero": 1,
            "memory": "detailed",
            "time": "detailed",
            "sensitivity": True,
        },
    ),
    # What it costs: a price, a power and a limit the plan is over (exit status 1).
    (
        "check",
        {
            "model": "70b",
            "tokens": 4.96e12,
            "tp": 8,
            "zero": 3,
            "price_per_gpu_hour": 2.5,
            "gpu_power_w": 700,
            "pue": 1.2,
            "carbon_g_per_kwh": 400,
            "max_cost": 3e6,
        },
    ),
    ("search", {"rank": "cost", "price_per_gpu_hour": 2.5, "max_cost": 3e6, "top": 3}),
    # Sequence parallelism off at TP 8: False is "off".
    (
        "check",
        {
            "model": "70b",
            "tokens": 4.96e12,
            "tp": 8,
            "zero": 1,
            "memory": "detailed",
            "sequence_parallel": False,
        },
    ),
    ("brief", {}),
    ("brief", {"gpu": "h200", "gpus": 512, "max_days": 60}),
]


def call(command, flags):
    return getattr(trainplan, command)(**flags)


@needs_bin
@pytest.mark.parametrize("command,flags", CALLS)
def test_json_is_the_binarys_byte_for_byte(command, flags):
    result = call(command, flags)
    out, _, status = cli(trainplan.argv(command, **flags))
    assert status in (0, 1)
    assert result.to_json() == out
    assert result.to_dict() == json.loads(out)
    assert result.passed == (status == 0)
    assert bool(result) == (status == 0)


def test_argv_maps_keyword_arguments_to_flags():
    assert trainplan.argv(
        "search",
        models=("70b", "405b"),
        tokens_max=5e13,
        top=3,
        exact=True,
        all=False,
        gpu=None,
        model_config=["a.json", Path("b.json")],
    ) == [
        "trainplan",
        "--quiet",
        "search",
        "--json",
        "--models",
        "70b,405b",
        "--tokens-max",
        "50000000000000.0",
        "--top",
        "3",
        "--exact",
        "--model-config",
        "a.json",
        "--model-config",
        "b.json",
    ]
    # An on/off flag: False is off, not left out.
    assert trainplan.argv("check", sequence_parallel=False)[-2:] == ["--sequence-parallel", "off"]
    assert trainplan.argv("check", sequence_parallel=True)[-2:] == ["--sequence-parallel", "on"]
    assert trainplan.argv("search", sequence_parallel=[True, False])[-2:] == [
        "--sequence-parallel",
        "on,off",
    ]
    assert trainplan.argv("check", tp_comm_overlap=False)[-2:] == ["--tp-comm-overlap", "off"]
    # A trailing underscore names a Python keyword.
    assert trainplan.argv("check", from_="train.sh") == [
        "trainplan",
        "--quiet",
        "check",
        "--json",
        "--from",
        "train.sh",
    ]
    assert trainplan.argv("brief", progress=True) == [
        "trainplan",
        "brief",
        "--print",
        "--format",
        "json",
    ]


def test_the_default_search_answers_the_default_brief():
    result = trainplan.search()
    best = result.plans[0]
    assert best.model == "llama3-70b"
    assert best["pass"] and best.passed
    assert best.layout["tp"] >= 1
    assert result.passing == result.to_dict()["passing"]
    text = str(best)
    assert "llama3-70b" in text and "days" in text and "loss" in text
    assert "llama3-70b" in repr(best) and "SearchResult" in repr(result)


def test_a_search_serving_inference_reports_the_lifetime_optimal_model():
    # Sardana et al. 2024 at the default brief's loss: a smaller model than the
    # compute-optimal one for that loss, trained longer, the more it serves.
    few = trainplan.search(inference_tokens=1e12).lifetime_optimal
    many = trainplan.search(inference_tokens=2e13, rank="lifetime").lifetime_optimal
    assert many["params"] < few["params"] and many["tokens"] > few["tokens"]
    assert many["inference_flops"] == pytest.approx(2 * many["params"] * 2e13, rel=1e-12)
    with pytest.raises(trainplan.TrainplanError, match="--inference-tokens"):
        trainplan.search(rank="lifetime")


@needs_bin
def test_a_launchers_file_is_graded_as_the_binary_grades_it(tmp_path):
    # The Megatron-LM file `export` writes, read back by `check --from`.
    script = tmp_path / "train.sh"
    out, _, status = cli(
        ["trainplan", "export", "--format", "megatron", "--model", "70b", "--tokens", "1e12",
         "--tp", "8", "--pp", "8", "--zero", "1", "-q"]
    )
    assert status in (0, 1)
    script.write_text(out)
    result = trainplan.check(from_=script)
    out, _, status = cli(trainplan.argv("check", from_=script))
    assert result.to_json() == out
    assert result.to_dict()["from"]["format"] == "megatron"
    assert result.layout["tp"] == 8 and result.layout["pp"] == 8


def test_check_result():
    result = trainplan.check(model="70b", tokens=4.96e12, tp=8, pp=1, zero=3)
    assert result.passed
    assert result.plan.model == "llama3-70b"
    assert result.plans[0].to_dict() == result.to_dict()
    assert result.layout["tp"] == 8
    assert "fixes" in dir(result)


def test_brief_result():
    b = trainplan.brief(gpus=512)
    assert b.gpus == 512
    assert "512" in repr(b)


@needs_bin
@pytest.mark.parametrize(
    "command,flags",
    [
        ("search", {"gpus": "many"}),
        ("search", {"no_such_flag": 1}),
        ("check", {"model": "70b"}),  # no --tokens
        ("check", {"model": "70b", "tokens": 1e12, "tp": 3}),
        ("brief", {"mfu": 2}),
    ],
)
def test_errors_carry_the_binarys_line(command, flags):
    with pytest.raises(trainplan.TrainplanError) as raised:
        call(command, flags)
    _, err, status = cli(trainplan.argv(command, **flags))
    assert status == 2
    message = str(raised.value)
    # The binary's line, less the `error: ` Python's exception name already says.
    assert "error: " + message == err.rstrip("\n")
    assert not message.startswith("error") and "\n" not in message
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    "call,says",
    [
        (
            lambda: trainplan.search(brief={"gpus": 1024}),
            "brief= takes the path of a brief file (JSON or TOML), not a dict, {'gpus': 1024}: "
            "save it (json.dump) and give its path, or give its fields as keyword arguments "
            "(gpus=1024, max_days=60)",
        ),
        (
            lambda: trainplan.check(model="70b", tokens=1e12, brief=trainplan.brief()),
            "brief= takes the path of a brief file (JSON or TOML), not a Brief (a result "
            "object): save it (json.dump) and give its path, or give its fields as keyword "
            "arguments (gpus=1024, max_days=60)",
        ),
        (
            lambda: trainplan.search(models=["70b", None]),
            "models=[1]: a string, a number, a bool or a path, not None",
        ),
        (
            lambda: trainplan.search(models=[["70b", "405b"]]),
            "models=[0]: a string, a number, a bool or a path, not a list, ['70b', '405b']",
        ),
        (
            lambda: trainplan.search(gpus={1024}),
            "gpus=: a string, a number, a bool or a path, not a set, {1024}",
        ),
        (
            lambda: trainplan.run(["search", "--brief", {"gpus": 1024}]),
            "args[2]: a string, a number, a bool or a path, not a dict, {'gpus': 1024}",
        ),
    ],
)
def test_a_value_with_no_command_line_form_is_refused_by_name(call, says):
    """A dict (or set, list in a list, None in a list, result object) is refused, naming the
    argument, before anything runs, rather than written as its str(): a brief= dict was read
    as a file called "{'gpus': 1024}". A dict brief is refused rather than taken: every call is
    a command line (argv, svg() and the binary give the same bytes), and a dict has none."""
    with pytest.raises(TypeError) as raised:
        call()
    assert str(raised.value) == says


def test_output_flags_are_refused():
    with pytest.raises(TypeError, match="always returns the JSON"):
        trainplan.search(format="csv")


def test_run_gives_any_output():
    text, passed = trainplan.run(["search", "--format", "csv", "--top", "2"])
    assert passed and text.count("\n") == 3


def test_to_pandas():
    pandas = pytest.importorskip("pandas")
    result = trainplan.search(top=5)
    frame = result.to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    assert len(frame) == 5
    assert list(frame["model"]) == [p.model for p in result.plans]
    assert "layout.tp" in frame.columns
    assert len(trainplan.check(model="70b", tokens=4.96e12, tp=8, zero=3).to_pandas()) == 1


def test_to_pandas_without_pandas_says_how_to_get_it(monkeypatch):
    # pandas stays optional: without it, the one call that needs it says so.
    import sys

    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        trainplan.search(top=1).to_pandas()


@needs_bin
def test_repr_svg_is_the_binarys_plot(tmp_path):
    flags = {"models": ["70b"], "top": 2}
    result = trainplan.search(**flags)
    svg = result._repr_svg_()
    assert svg.startswith("<svg")
    path = tmp_path / "loss.svg"
    cli(trainplan.argv("search", plot=path, **flags))
    assert svg == path.read_text(encoding="utf-8")
    memory = trainplan.check(model="70b", tokens=4.96e12, tp=8, zero=3)._repr_svg_()
    assert memory.startswith("<svg")


SMALL_FAMILY = {
    "layers": "40..160:40",
    "hidden": "6144..20480:1024",
    "ffn_ratio": "3.0..4.0:0.5",
    "memory": "detailed",
    "time": "detailed",
    "top": 1,
}
LONG = {
    "layers": "40..160:4",
    "hidden": "6144..20480:512",
    "ffn_ratio": "3.0..4.0:0.25",
    "memory": "detailed",
    "time": "detailed",
}


def test_ctrl_c_stops_a_long_search():
    """A search of a large family (over 20 s), sent SIGINT (Ctrl-C) after half a second,
    raises KeyboardInterrupt within a few seconds; a search after it runs to its end."""
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            trainplan.search(**LONG)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 10
    assert trainplan.search(models=["70b"], top=1).plans[0].model == "llama3-70b"


def test_the_gil_is_released():
    """Another Python thread runs while a search does: it ticks every 5 ms through a search of
    a few tenths of a second (a small detailed family), where a held GIL would let it tick once
    or twice. The 70B model alone is searched in a few milliseconds, too short to tell."""
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        started = time.monotonic()
        trainplan.search(**SMALL_FAMILY)
        ended = time.monotonic()
    finally:
        done.set()
        ticker.join()
    during = [t for t in ticks if started < t < ended]
    assert ended - started > 0.1, "the search was too short to tell"
    assert len(during) >= 5, f"{len(during)} ticks in a {ended - started:.2f} s search"


def test_ctrl_c_stops_another_threads_search_loudly():
    """The stop is process-wide: a search on another thread stops too, and raises rather than
    return a partial answer."""
    raised = []

    def other():
        try:
            trainplan.search(**LONG)
        except KeyboardInterrupt as e:
            raised.append(e)

    worker = threading.Thread(target=other)
    worker.start()
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            trainplan.search(**LONG)
    finally:
        timer.cancel()
        worker.join(timeout=30)
    assert not worker.is_alive()
    assert len(raised) == 1 and "another call" in str(raised[0])


SERVE_AND_INTERRUPT = """
import _thread, socket, sys, threading, time, urllib.request
import trainplan

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]

def interrupt_once_up():
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/presets", timeout=1).read()
            break
        except OSError:
            time.sleep(0.05)
    else:
        print("the server never answered", flush=True)
    _thread.interrupt_main()

threading.Thread(target=interrupt_once_up, daemon=True).start()
try:
    trainplan.run(["-q", "serve", "--port", str(port)])
except KeyboardInterrupt:
    print("stopped", flush=True)
"""


def test_a_keyboard_interrupt_from_another_thread_stops_a_server():
    """`trainplan.run(["serve", ...])` stops on a KeyboardInterrupt that no signal carried
    (`_thread.interrupt_main()`, as a notebook's or an app's other thread raises it) once the
    server has answered, rather than serve on with its caller stuck. In a child process, so
    that a server that does not stop fails the test by its timeout instead of hanging it."""
    done = subprocess.run(
        [sys.executable, "-c", SERVE_AND_INTERRUPT],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.decode() == "stopped\n", done.stderr.decode()
    assert done.returncode == 0
