"""The native half of the package (Rust, PyO3); use `trainplan` itself."""

from typing import List, Tuple

__version__: str

class TrainplanError(ValueError):
    """Bad input: the command line's one-line message (`error: ...`)."""

def run(argv: List[str]) -> Tuple[str, bool]:
    """Runs the command line `argv` (program name first): (stdout, passed)."""
