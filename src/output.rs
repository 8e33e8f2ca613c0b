//! Writing results: atomically to files, quietly to a closed pipe.

use std::io::{self, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// Writes `bytes` to `path` atomically: into a temporary file in the same directory, flushed
/// to disk, then renamed over `path`. An interrupted run leaves whatever was at `path` intact.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io_err = |source| Error::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".trainplan-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io_err)?;
    tmp.write_all(bytes).map_err(io_err)?;
    tmp.as_file().sync_all().map_err(io_err)?;
    tmp.persist(path).map_err(|e| io_err(e.error))?;
    Ok(())
}

/// Whether two paths name the same file (both must exist to be the same).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Writes `text` to `out`. A reader that has gone away (a closed pipe, as in
/// `trainplan search --all | head`) is not an error: the result is `Ok(false)`, and the caller
/// should stop writing.
pub fn emit(out: &mut impl Write, text: &str) -> io::Result<bool> {
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("front.json");
        std::fs::write(&p, "old").unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_write_into_a_missing_directory_names_the_path() {
        let e = write_atomic(Path::new("/nonexistent/dir/x.json"), b"x").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot write '/nonexistent/dir/x.json'"),
            "{e}"
        );
    }

    #[test]
    fn the_same_file_is_recognised_through_another_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.json");
        std::fs::write(&p, "{}").unwrap();
        assert!(same_file(&p, &dir.path().join(".").join("b.json")));
        assert!(!same_file(&p, &dir.path().join("missing.json")));
    }

    struct ClosedPipe;
    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_is_not_an_error() {
        assert!(!emit(&mut ClosedPipe, "plans").unwrap());
        let mut buf = Vec::new();
        assert!(emit(&mut buf, "plans").unwrap());
    }
}
