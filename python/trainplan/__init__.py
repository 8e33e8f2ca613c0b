"""Plan a large language-model training run from Python.

The commands of the ``trainplan`` command line as functions, run by the same library the binary
is built from, in this process::

    >>> import trainplan
    >>> result = trainplan.search(gpus=1024, max_days=60)
    >>> print(result.plans[0])
    >>> result.to_json()          # byte for byte `trainplan search --gpus 1024 --max-days 60 --json`

Keyword arguments are the command line's flags, ``snake_case`` for ``--kebab-case``:
``True`` gives the bare flag, ``False`` and ``None`` leave it out, a list or tuple is joined
with commas (``models=["70b", "405b"]``; ``model_config`` is repeated instead), numbers are
written as Python writes them (``tokens=4.96e12``), paths as given. Each call returns a result
object wrapping the command's JSON: :class:`SearchResult`, :class:`CheckResult`,
:class:`Brief`. Bad input raises :class:`TrainplanError` with the command line's one-line
message. See ``docs/python.md`` in the repository.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from . import _trainplan
from ._trainplan import TrainplanError

__all__ = [
    "TrainplanError",
    "check",
    "search",
    "brief",
    "run",
    "argv",
    "CheckResult",
    "SearchResult",
    "Brief",
    "Plan",
    "__version__",
]

__version__: str = _trainplan.__version__

#: Flags that take a list by being repeated rather than comma-joined.
_REPEATED = frozenset({"model_config"})

#: Flags the functions set themselves: the output is always the JSON.
_RESERVED = frozenset({"json", "format", "quiet"})


def _value(value: Any, name: str) -> str:
    """One value as the command line takes it; ``name`` is what errors call it.

    A value with no command-line form (a dict, a set, bytes, ``None`` or a list inside a list,
    a result object) raises ``TypeError`` naming ``name`` rather than becoming its ``str()``: a
    dict given as ``brief=`` was read as a file called ``{'gpus': 1024}``.
    """
    if isinstance(value, bool):  # before int: True is an int
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (Mapping, _Result)) and name == "brief=":
        raise TypeError(
            f"brief= takes the path of a brief file (JSON or TOML), not {_shown(value)}: save "
            "it (json.dump) and give its path, or give its fields as keyword arguments "
            "(gpus=1024, max_days=60)"
        )
    if value is None or isinstance(
        value, (Mapping, set, frozenset, bytes, bytearray, list, tuple, _Result, Plan)
    ):
        raise TypeError(f"{name}: a string, a number, a bool or a path, not {_shown(value)}")
    return str(value)


def _shown(value: Any) -> str:
    """A value as an error names it: its type, and its start where that is short to show."""
    if value is None:
        return "None"
    if isinstance(value, (_Result, Plan)):
        return f"a {type(value).__name__} (a result object)"
    text = repr(value)
    return f"a {type(value).__name__}, {text if len(text) <= 60 else text[:57] + '...'}"


# Flags whose value is on or off (`--sequence-parallel on|off`, `--tp-comm-overlap on|off`; a
# list on `search`): a Python bool is written as on or off, so False says off rather than
# leaving the default.
_ON_OFF = frozenset({"sequence_parallel", "tp_comm_overlap"})


def _on_off(value: Any) -> Any:
    """``True``/``False`` (or a list of them) as ``"on"``/``"off"``; other values as given."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return [_on_off(v) for v in value]
    return value


def _flags(flags: Mapping[str, Any]) -> List[str]:
    """Keyword arguments as command-line flags, in the order given.

    A trailing underscore is dropped, Python's way of naming a keyword: ``from_="train.sh"`` is
    ``--from train.sh``.
    """
    args: List[str] = []
    for key, value in flags.items():
        if key in _ON_OFF:
            # A flag that takes on or off: False is "off", not the flag left out.
            value = _on_off(value)
        if value is None or value is False:
            continue
        flag = "--" + key.rstrip("_").replace("_", "-")
        name = f"{key}="
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            items = [_value(item, f"{key}=[{i}]") for i, item in enumerate(value)]
            if key in _REPEATED:
                for item in items:
                    args += [flag, item]
            else:
                args += [flag, ",".join(items)]
        else:
            args += [flag, _value(value, name)]
    return args


def argv(command: str, progress: bool = False, **flags: Any) -> List[str]:
    """The command line a call runs, program name first.

    ``argv("search", gpus=1024)`` is ``["trainplan", "--quiet", "search", "--json", "--gpus",
    "1024"]``: run by the binary, it prints the very bytes ``search(gpus=1024).to_json()``
    returns. ``command`` is ``"check"``, ``"search"`` or ``"brief"``; ``progress=True`` drops
    ``--quiet`` (the progress bar and the notes go to stderr).
    """
    for key in flags:
        if key in _RESERVED:
            raise TypeError(
                f"trainplan.{command}() takes no {key}= argument: it always returns the JSON "
                "(progress=True for the progress bar and notes)"
            )
    if command == "brief":
        output = ["--print", "--format", "json"]
    elif command in ("check", "search"):
        output = ["--json"]
    else:
        raise ValueError(f"command: expected check, search or brief, not {command!r}")
    quiet = [] if progress else ["--quiet"]
    return ["trainplan", *quiet, command, *output, *_flags(flags)]


def run(args: Sequence[str]) -> Tuple[str, bool]:
    """Run any command line, ``args`` without the program name, as the binary would.

    Returns ``(stdout, passed)``: the text the command prints and whether the answer is yes
    (exit status 0) or no (1). ``run(["search", "--format", "csv"])`` gives the plans as CSV.
    Raises :class:`TrainplanError` for bad input (exit status 2), with its one-line message.
    Releases the GIL while it runs; Ctrl-C raises ``KeyboardInterrupt``.
    """
    if isinstance(args, str):
        raise TypeError("args: a list of strings, such as ['search', '--gpus', '1024']")
    return _trainplan.run(["trainplan", *[_value(a, f"args[{i}]") for i, a in enumerate(args)]])


class Plan(Mapping[str, Any]):
    """One plan: the JSON contract's plan object (``docs/json.md``).

    Read its fields as attributes (``plan.model``, ``plan.layout``, ``plan.days``) or as a
    mapping (``plan["pass"]``, since ``pass`` is a Python keyword; also :attr:`passed`).
    ``str(plan)`` is one line: model, tokens, layout, days, loss, memory and verdict.
    """

    def __init__(self, data: Dict[str, Any]):
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_data"][name]
        except KeyError:
            raise AttributeError(f"a plan has no field {name!r}") from None

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self._data))

    @property
    def passed(self) -> bool:
        """Whether the plan passes every check (the JSON's ``pass``)."""
        return bool(self._data.get("pass"))

    def to_dict(self) -> Dict[str, Any]:
        """The plan object, as ``json.loads`` reads it."""
        return self._data

    def __str__(self) -> str:
        d = self._data
        layout = d.get("layout", {})
        parts = [f"TP {layout.get('tp')}"]
        if layout.get("cp", 1) != 1:
            parts.append(f"CP {layout['cp']}")
        parts += [f"PP {layout.get('pp')}", f"DP {_number(layout.get('dp'), ',')}"]
        text = " × ".join(parts) + f", ZeRO {layout.get('zero')}"
        memory = d.get("memory_gb", {}).get("total")
        verdict = "pass" if d.get("pass") else "fail: " + "; ".join(d.get("reasons", []))
        return (
            f"{d.get('model')}: {_tokens(d.get('tokens'))} tokens, {text}, "
            f"{_number(d.get('days'), '.3f')} days, loss {_number(d.get('loss'), '.5f')}, "
            f"{_number(memory, '.2f')} GB/GPU, {verdict}"
        )

    def __repr__(self) -> str:
        return f"<trainplan.Plan {self}>"


def _number(x: Any, spec: str) -> str:
    """`x` formatted by `spec`, or as it is when it is not a number (a null: `?`)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return format(x, spec)
    return "?" if x is None else str(x)


def _tokens(n: Optional[int]) -> str:
    """A token count as the report writes it: 4.96 T."""
    if n is None:
        return "?"
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:,}"


class _Result:
    """The JSON a command printed, with the call that made it."""

    _command = ""

    def __init__(self, text: str, passed: bool, flags: Dict[str, Any]):
        self._text = text
        self._passed = passed
        self._flags = flags
        self._data: Optional[Dict[str, Any]] = None
        self._svg: Optional[str] = None

    def to_json(self) -> str:
        """The JSON exactly as the command line prints it, byte for byte (with its final newline)."""
        return self._text

    def to_dict(self) -> Dict[str, Any]:
        """The JSON as ``json.loads`` reads it (a fresh copy each call)."""
        return json.loads(self._text)

    def _dict(self) -> Dict[str, Any]:
        if self._data is None:
            self._data = json.loads(self._text)
        return self._data

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._dict()[name]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} has no field {name!r} (to_dict() lists them)"
            ) from None

    def __getitem__(self, key: str) -> Any:
        return self._dict()[key]

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self._dict()))

    @property
    def passed(self) -> bool:
        """The command line's answer: True for exit status 0 (yes), False for 1 (no)."""
        return self._passed

    def __bool__(self) -> bool:
        return self._passed

    @property
    def argv(self) -> List[str]:
        """The command line that prints this JSON (``trainplan`` first)."""
        return argv(self._command, **self._flags)


class _Plotted(_Result):
    """A result the command line can draw with ``--plot``."""

    def svg(self) -> str:
        """The chart ``--plot`` draws for the same call, as SVG text (computed once).

        Runs the command again with ``--plot`` to a temporary file. ``check``: memory per GPU
        by component against the cap; ``search``: predicted loss against days; with
        ``sensitivity=True``, a tornado chart of days. Raises :class:`TrainplanError` when the
        command line cannot draw it.
        """
        if self._svg is None:
            with tempfile.TemporaryDirectory(prefix="trainplan-") as folder:
                path = os.path.join(folder, "plot.svg")
                flags = dict(self._flags, plot=path)
                _trainplan.run(argv(self._command, **flags))
                with open(path, encoding="utf-8") as f:
                    self._svg = f.read()
        return self._svg

    def _repr_svg_(self) -> Optional[str]:
        """The chart, for Jupyter; None when there is none to draw."""
        try:
            return self.svg()
        except TrainplanError:
            return None

    def to_pandas(self) -> Any:
        """The plans as a pandas DataFrame, one row a plan, nested fields flattened to
        dotted columns (``layout.tp``, ``memory_gb.total``). Needs pandas installed."""
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "to_pandas() needs pandas, which trainplan does not install: pip install pandas"
            ) from None
        return pandas.json_normalize([plan.to_dict() for plan in self.plans])


class SearchResult(_Plotted):
    """The answer of :func:`search`: the ``search --json`` document (``docs/json.md``).

    Top-level fields are attributes: ``brief``, ``shapes``, ``passing``, ``budget_flops``, ….
    :attr:`plans` are :class:`Plan` objects, best first; ``bool(result)`` is whether any plan
    passes. In Jupyter it shows the loss–days chart.
    """

    _command = "search"

    @property
    def plans(self) -> List[Plan]:
        """The listed plans, ranked, as :class:`Plan` objects."""
        return [Plan(p) for p in self._dict()["plans"]]

    def __repr__(self) -> str:
        d = self._dict()
        best = f"; best: {Plan(d['plans'][0])}" if d.get("plans") else ""
        return (
            f"<trainplan.SearchResult: {d.get('passing', 0):,} passing plans of "
            f"{d.get('evaluated', 0):,} graded{best}>"
        )


class CheckResult(_Plotted):
    """The answer of :func:`check`: the plan object of ``check --json``, with its ``fixes``.

    Its fields are attributes (``days``, ``loss``, ``memory_gb``, ``reasons``, ``fixes``);
    :attr:`plan` is it as a :class:`Plan`, :attr:`plans` a list of that one plan;
    ``bool(result)`` is whether it passes. In Jupyter it shows the memory chart.
    """

    _command = "check"

    @property
    def plan(self) -> Plan:
        """The graded design as a :class:`Plan`."""
        return Plan(self._dict())

    @property
    def plans(self) -> List[Plan]:
        """``[self.plan]``, so a check becomes a one-row DataFrame like a search."""
        return [self.plan]

    def __repr__(self) -> str:
        return f"<trainplan.CheckResult {self.plan}>"


class Brief(_Result):
    """The effective brief of :func:`brief`: ``brief --print --format json``.

    Its fields are attributes (``gpus``, ``max_days``, ``loss_target``, ``loss_law``, …). The
    JSON can be saved and given back as ``brief=path`` to the other commands.
    """

    _command = "brief"

    def __repr__(self) -> str:
        d = self._dict()
        return (
            f"<trainplan.Brief: {d.get('gpus'):,} GPUs, at most {d.get('max_days')} days, "
            f"loss ≤ {d.get('loss_target')}>"
        )


def _call(kind: type, progress: bool, flags: Dict[str, Any]) -> Any:
    text, passed = _trainplan.run(argv(kind._command, progress=progress, **flags))
    return kind(text, passed, flags)


def search(*, progress: bool = False, **flags: Any) -> SearchResult:
    """Search every shape, token count and layout: ``trainplan search --json``.

    With no arguments it answers the default brief (2,048 H100s, 30 days, loss ≤ 1.955, Llama
    3 8B, 70B and 405B). Keyword arguments are ``search``'s flags (``trainplan search
    --help``): ``models=["70b", "405b"]``, ``gpus=1024``, ``max_days=60``, ``rank="days"``,
    ``top=20``, ``memory="detailed"``, ``time="detailed"``, ``layers="40..160:4"``, ….
    ``progress=True`` shows the progress bar and notes on stderr.

    The search runs with the GIL released; Ctrl-C stops it and raises ``KeyboardInterrupt``.
    Raises :class:`TrainplanError` for bad input, with the command line's one-line message.
    """
    return _call(SearchResult, progress, flags)


def check(*, progress: bool = False, **flags: Any) -> CheckResult:
    """Grade one design: ``trainplan check --json``.

    ``check(model="70b", tokens=4.96e12, tp=8, pp=1, zero=3)``; any other flag of ``check``
    (``trainplan check --help``) as a keyword argument, such as ``memory="detailed"``,
    ``time="detailed"`` or ``sensitivity=True``. ``bool(result)`` is whether every check
    passes. Raises :class:`TrainplanError` for bad input, with the command line's one-line
    message.
    """
    return _call(CheckResult, progress, flags)


def brief(**flags: Any) -> Brief:
    """The effective brief: ``trainplan brief --print --format json``.

    The default brief, then a file (``brief="brief.toml"``), a GPU preset (``gpu="h200"``) and
    the brief's flags (``gpus=1024``, ``max_days=60``), in that order. Raises
    :class:`TrainplanError` when it is not valid.
    """
    return _call(Brief, False, flags)
