//! `trainplan._trainplan`, the native half of the Python package: the command line of the
//! library (`trainplan::cli::run`) run on a worker thread with the GIL released, its main
//! output returned as text. The Python half (`python/trainplan/__init__.py`) turns keyword
//! arguments into the command line and wraps the JSON in result objects.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use trainplan::cli::{self, Outcome};
use trainplan::search::progress;

pyo3::create_exception!(
    trainplan,
    TrainplanError,
    PyValueError,
    "Bad input: the command line's one-line message, as `trainplan` prints it on stderr (after \
     its `error: `) before exiting with status 2."
);

/// How long the waiting thread sleeps, GIL released, between looks for Ctrl-C.
const SLICE: Duration = Duration::from_millis(50);

/// Counts the edges of every stop: up once when a call asks the library to stop, once more
/// when it lets searches run again. A call that sees it move ran while searches were stopped
/// (the stop is process-wide), so its answer may be incomplete and is not returned.
static STOPS: AtomicU64 = AtomicU64::new(0);

/// What the worker thread hands back: the command's result and its main output.
type Done = (std::thread::Result<Result<Outcome, String>>, Vec<u8>);

/// Runs the command line `argv` (the program's name first, as `sys.argv`) exactly as the
/// `trainplan` binary would, and returns `(output, passed)`: the text it writes to stdout and
/// whether the answer is yes (exit status 0) or no (1). `--help` and `--version` return their
/// text with `passed` true. Bad input (exit status 2) raises `TrainplanError` carrying the
/// one-line message. The command runs with the GIL released; Ctrl-C (SIGINT), or any other
/// `KeyboardInterrupt` (`_thread.interrupt_main()`), stops a search at its next layout and a
/// server (`serve`) within 50 ms, and raises `KeyboardInterrupt`.
#[pyfunction]
fn run(py: Python<'_>, argv: Vec<String>) -> PyResult<(String, bool)> {
    let stops = STOPS.load(Ordering::SeqCst);
    let (sender, mut receiver) = mpsc::channel::<Done>();
    let worker = std::thread::Builder::new()
        .name("trainplan".into())
        .spawn(move || {
            let mut out = Vec::new();
            let result = catch_unwind(AssertUnwindSafe(|| cli::run(&argv, &mut out)));
            let _ = sender.send((result, out));
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    let (result, out) = loop {
        let (back, got) = py.detach(move || {
            let got = receiver.recv_timeout(SLICE);
            (receiver, got)
        });
        receiver = back;
        match got {
            Ok(done) => break done,
            Err(RecvTimeoutError::Timeout) => {
                if let Err(signal) = py.check_signals() {
                    // Ctrl-C (or another handler that raised): stop the search, wait for the
                    // worker to return (its partial answer is dropped), let later searches
                    // run, and raise.
                    STOPS.fetch_add(1, Ordering::SeqCst);
                    progress::interrupt();
                    let _ = py.detach(move || worker.join());
                    progress::resume();
                    STOPS.fetch_add(1, Ordering::SeqCst);
                    return Err(signal);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err("trainplan: the worker thread died"))
            }
        }
    };
    let _ = py.detach(move || worker.join());
    if STOPS.load(Ordering::SeqCst) != stops {
        return Err(PyKeyboardInterrupt::new_err(
            "trainplan: stopped by a Ctrl-C that stopped another call's search (its answer may be incomplete)",
        ));
    }
    let text = String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    match result {
        Ok(Ok(Outcome::Answer(passed))) => Ok((text, passed)),
        Ok(Ok(Outcome::Help(shown))) => Ok((shown.render().to_string(), true)),
        // The binary's line less its `error: `: Python names the exception already.
        Ok(Err(message)) => Err(TrainplanError::new_err(
            message
                .strip_prefix("error: ")
                .unwrap_or(&message)
                .to_string(),
        )),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            Err(PyRuntimeError::new_err(format!(
                "trainplan panicked (a bug, please report it): {what}"
            )))
        }
    }
}

/// The native half of the `trainplan` package; use `trainplan` itself.
#[pymodule]
fn _trainplan(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add("TrainplanError", m.py().get_type::<TrainplanError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
