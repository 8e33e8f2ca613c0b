//! Writing results: atomically to files, quietly to a closed pipe.

use std::io::{self, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// Writes `bytes` to `path` atomically: into a temporary file in the same directory, flushed
/// to disk, then renamed over `path`. An interrupted run leaves whatever was at `path` intact.
///
/// A symbolic link is followed and its target replaced, not the link. Something that is not a
/// regular file (`/dev/null`, a named pipe, `/dev/stdout`) is written to in place, since it
/// cannot be replaced. A new file gets mode 0644; a replaced file keeps its mode.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io_err = |source: io::Error| Error::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    };
    let target = match std::fs::canonicalize(path) {
        Ok(resolved) => resolved,
        Err(_) => path.to_path_buf(),
    };
    let existing = std::fs::metadata(&target).ok();
    if let Some(meta) = &existing {
        if !meta.is_file() {
            let mut file = open_special(&target, meta).map_err(io_err)?;
            return file.write_all(bytes).map_err(io_err);
        }
    }
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Checked first so that the error names the cause, not tempfile's random file name.
    std::fs::metadata(dir).map_err(io_err)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".trainplan-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io_err)?;
    tmp.write_all(bytes).map_err(io_err)?;
    let permissions = match &existing {
        Some(meta) => meta.permissions(),
        None => default_permissions(tmp.as_file()).map_err(io_err)?,
    };
    tmp.as_file().set_permissions(permissions).map_err(io_err)?;
    tmp.as_file().sync_all().map_err(io_err)?;
    tmp.persist(&target).map_err(|e| io_err(e.error))?;
    Ok(())
}

/// Opens an existing output that is not a regular file (`/dev/null`, `/dev/stdout`, a pipe
/// from the shell's `>(…)`) to write it in place. A FIFO is opened without blocking, so one
/// that no process reads is an error at once instead of a wait for ever; the write itself then
/// blocks as usual.
#[cfg(unix)]
fn open_special(target: &Path, meta: &std::fs::Metadata) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    use std::os::unix::io::AsRawFd;
    if !meta.file_type().is_fifo() {
        return std::fs::OpenOptions::new().write(true).open(target);
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(target)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => io::Error::new(
                io::ErrorKind::BrokenPipe,
                "a FIFO that no process is reading",
            ),
            _ => e,
        })?;
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is the open descriptor `file` owns for this whole block; F_GETFL and
    // F_SETFL read and set its status flags and touch no memory.
    let cleared = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if !cleared {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// Opens an existing output that is not a regular file, to write it in place.
#[cfg(not(unix))]
fn open_special(target: &Path, _meta: &std::fs::Metadata) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new().write(true).open(target)
}

/// Permissions for a new file: rw-r--r-- where that means something.
#[cfg(unix)]
fn default_permissions(_file: &std::fs::File) -> io::Result<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Ok(std::fs::Permissions::from_mode(0o644))
}

/// Permissions for a new file: those the temporary file already has.
#[cfg(not(unix))]
fn default_permissions(file: &std::fs::File) -> io::Result<std::fs::Permissions> {
    Ok(file.metadata()?.permissions())
}

/// Whether two paths name the same file (both must exist to be the same).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// A write to stdout, its failure as an error naming `<stdout>` (a reader gone away is told
/// by the error's kind, `BrokenPipe`: see [`quietly_closed`]).
pub fn written(result: io::Result<()>) -> Result<()> {
    result.map_err(|source| Error::Io {
        action: "write",
        path: "<stdout>".into(),
        source,
    })
}

/// A write to a reader that has gone away (`trainplan search --all | head`) ends the output
/// quietly: not an error.
pub fn quietly_closed(result: Result<()>) -> Result<()> {
    match result {
        Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes `text` to `out`. A reader that has gone away (a closed pipe, as in
/// `trainplan search --all | head`) is not an error: the result is `Ok(false)`, and the caller
/// should stop writing.
pub fn emit<W: Write + ?Sized>(out: &mut W, text: &str) -> io::Result<bool> {
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
    fn a_write_into_a_missing_directory_names_the_path_and_the_cause_only() {
        let e = write_atomic(Path::new("/nonexistent/dir/x.json"), b"x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot write '/nonexistent/dir/x.json': No such file or directory (os error 2)"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_new_file_is_readable_by_all_and_a_replaced_one_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("new.json");
        write_atomic(&fresh, b"{}").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&fresh), 0o644);
        let kept = dir.path().join("kept.json");
        std::fs::write(&kept, "old").unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&kept, b"new").unwrap();
        assert_eq!(mode(&kept), 0o640);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_is_followed_and_a_device_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        write_atomic(Path::new("/dev/null"), b"discarded").unwrap();
        assert!(!std::fs::metadata("/dev/null").unwrap().is_file());
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
