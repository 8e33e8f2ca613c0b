"""Type stubs of `trainplan`: the command line's commands as functions (docs/python.md)."""

from os import PathLike
from typing import Any, Dict, Iterator, List, Literal, Mapping, Optional, Sequence, Tuple, Union

from ._trainplan import TrainplanError as TrainplanError

__version__: str

_Path = Union[str, "PathLike[str]"]
_Number = Union[int, float]
_List = Union[str, Sequence[Any]]

class Plan(Mapping[str, Any]):
    """One plan object of the JSON contract; fields as attributes or keys."""

    model: str
    params: int
    tokens: int
    layout: Dict[str, int]
    memory_gb: Dict[str, float]
    flops: float
    days: float
    loss: float
    checks: Dict[str, bool]
    margins: Dict[str, float]
    reasons: List[str]
    def __init__(self, data: Dict[str, Any]) -> None: ...
    def __getitem__(self, key: str) -> Any: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def __getattr__(self, name: str) -> Any: ...
    @property
    def passed(self) -> bool: ...
    def to_dict(self) -> Dict[str, Any]: ...

class _Result:
    def to_json(self) -> str:
        """The JSON exactly as the command line prints it."""
    def to_dict(self) -> Dict[str, Any]:
        """`json.loads(self.to_json())`."""
    def __getattr__(self, name: str) -> Any: ...
    def __getitem__(self, key: str) -> Any: ...
    def __bool__(self) -> bool: ...
    @property
    def passed(self) -> bool: ...
    @property
    def argv(self) -> List[str]: ...

class _Plotted(_Result):
    def svg(self) -> str: ...
    def _repr_svg_(self) -> Optional[str]: ...
    def to_pandas(self) -> Any:
        """The plans as a pandas.DataFrame (needs pandas)."""
    @property
    def plans(self) -> List[Plan]: ...

class SearchResult(_Plotted):
    schema_version: int
    brief: Dict[str, Any]
    token_grid: Dict[str, int]
    rank: str
    exact: bool
    distinct: str
    choices: int
    budget_flops: float
    compute_optimal: Dict[str, Any]
    shapes: List[Dict[str, Any]]
    evaluated: int
    passing: int

class CheckResult(_Plotted):
    model: str
    params: int
    tokens: int
    layout: Dict[str, int]
    memory_gb: Dict[str, float]
    days: float
    loss: float
    reasons: List[str]
    fixes: List[Any]
    @property
    def plan(self) -> Plan: ...

class Brief(_Result):
    gpus: int
    peak_tflops: float
    gpu_memory_gb: float
    memory_cap_gb: float
    gpus_per_node: int
    scale_up_gpus: Optional[int]
    scale_up_used: Optional[int]
    mfu: float
    max_days: float
    loss_target: float
    seq_len: int

def argv(command: Literal["check", "search", "brief"], progress: bool = ..., **flags: Any) -> List[str]: ...
def run(args: Sequence[str]) -> Tuple[str, bool]: ...
def search(
    *,
    progress: bool = ...,
    brief: Optional[_Path] = ...,
    gpu: Optional[str] = ...,
    gpus: Optional[int] = ...,
    mfu: Optional[float] = ...,
    max_days: Optional[_Number] = ...,
    loss_target: Optional[float] = ...,
    memory_cap_gb: Optional[_Number] = ...,
    seq_len: Optional[int] = ...,
    models: Optional[_List] = ...,
    model_config: Optional[Union[_Path, Sequence[_Path]]] = ...,
    tokens_min: Optional[_Number] = ...,
    tokens_max: Optional[_Number] = ...,
    tokens_step: Optional[_Number] = ...,
    rank: Optional[Literal["loss", "days", "memory", "cost"]] = ...,
    price_per_gpu_hour: Optional[float] = ...,
    max_cost: Optional[float] = ...,
    gpu_power_w: Optional[float] = ...,
    pue: Optional[float] = ...,
    carbon_g_per_kwh: Optional[float] = ...,
    from_: Optional[_Path] = ...,
    top: Optional[int] = ...,
    distinct: Optional[Literal["plan", "layout", "shape"]] = ...,
    exact: bool = ...,
    sensitivity: bool = ...,
    layers: Optional[Union[str, int]] = ...,
    hidden: Optional[Union[str, int]] = ...,
    ffn_ratio: Optional[str] = ...,
    ffn: Optional[int] = ...,
    memory: Optional[Literal["plate", "detailed"]] = ...,
    time: Optional[Literal["plate", "detailed"]] = ...,
    stack: Optional[str] = ...,
    micro_batches: Optional[_List] = ...,
    recompute: Optional[_List] = ...,
    precisions: Optional[_List] = ...,
    cp: Optional[_List] = ...,
    plot: Optional[_Path] = ...,
    pareto: Optional[_Path] = ...,
    threads: Optional[int] = ...,
    **flags: Any,
) -> SearchResult: ...
def check(
    *,
    progress: bool = ...,
    model: Optional[str] = ...,
    model_config: Optional[_Path] = ...,
    from_: Optional[_Path] = ...,
    tokens: Optional[_Number] = ...,
    sequence_parallel: Optional[Union[bool, Literal["on", "off"]]] = ...,
    tp: Optional[int] = ...,
    pp: Optional[int] = ...,
    cp: Optional[int] = ...,
    zero: Optional[int] = ...,
    memory: Optional[Literal["plate", "detailed"]] = ...,
    time: Optional[Literal["plate", "detailed"]] = ...,
    stack: Optional[str] = ...,
    sensitivity: bool = ...,
    plot: Optional[_Path] = ...,
    brief: Optional[_Path] = ...,
    gpu: Optional[str] = ...,
    gpus: Optional[int] = ...,
    mfu: Optional[float] = ...,
    max_days: Optional[_Number] = ...,
    loss_target: Optional[float] = ...,
    price_per_gpu_hour: Optional[float] = ...,
    max_cost: Optional[float] = ...,
    gpu_power_w: Optional[float] = ...,
    pue: Optional[float] = ...,
    carbon_g_per_kwh: Optional[float] = ...,
    **flags: Any,
) -> CheckResult: ...
def brief(
    *,
    brief: Optional[_Path] = ...,
    gpu: Optional[str] = ...,
    gpus: Optional[int] = ...,
    mfu: Optional[float] = ...,
    max_days: Optional[_Number] = ...,
    loss_target: Optional[float] = ...,
    **flags: Any,
) -> Brief: ...
