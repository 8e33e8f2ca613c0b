//! Progress reporting from the search, through an observer whose methods do nothing by
//! default. The library never draws anything; the binary draws a bar on a terminal.

/// Told how far a long computation has come. Called from several threads at once.
pub trait Progress: Sync {
    /// The work has `total` units.
    fn start(&self, _total: u64) {}
    /// `n` more units are done.
    fn advance(&self, _n: u64) {}
    /// The work is over.
    fn finish(&self) {}
    /// Whether whoever watches wants this computation stopped early: a search checks it, with
    /// [`interrupted`], between blocks of shapes and between a shape's layouts
    /// ([`stopping`]). What a stopped search returns is incomplete and must be discarded. For
    /// a host that stops one computation and not the others, such as the server when a
    /// request times out or its client leaves. [default: never]
    fn cancelled(&self) -> bool {
        false
    }
}

/// Whether the computation `progress` watches should stop now: [`interrupt`] was called (and
/// not yet [`resume`]), or `progress` is [cancelled](Progress::cancelled).
pub fn stopping(progress: &dyn Progress) -> bool {
    interrupted() || progress.cancelled()
}

/// The items of `items` until `progress` is [`stopping`], for a loop that checks before each.
pub fn until_stopped<I: IntoIterator>(
    items: I,
    progress: &dyn Progress,
) -> UntilStopped<'_, I::IntoIter> {
    UntilStopped {
        items: items.into_iter(),
        progress,
    }
}

/// The iterator of [`until_stopped`].
pub struct UntilStopped<'a, I> {
    items: I,
    progress: &'a dyn Progress,
}

impl<I: Iterator> Iterator for UntilStopped<'_, I> {
    type Item = I::Item;

    /// The next item, unless `progress` is stopping. The check is a call to a function kept
    /// out of line and marked cold: the weighing's speed hangs on what LLVM inlines into the
    /// loop over a shape's layouts, and a plain check in that loop cost 3 % more instructions
    /// in a detailed family search (callgrind, one thread); this way, 4 % fewer there, 2.5 %
    /// fewer in the 70B detailed search, 0.8 % more in a plate family sweep (inlining moves
    /// with any change to that loop: these are this build's numbers).
    #[inline]
    fn next(&mut self) -> Option<I::Item> {
        if stopping_cold(self.progress) {
            return None;
        }
        self.items.next()
    }
}

/// [`stopping`], out of line ([`UntilStopped::next`]).
#[cold]
#[inline(never)]
fn stopping_cold(progress: &dyn Progress) -> bool {
    stopping(progress)
}

/// Progress that goes nowhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {}

/// Set by [`interrupt`]: the search stops at its next block of shapes.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks every search running in this process to stop early, at its next block of shapes (16
/// shapes of a detailed search, 4,096 of the plate's) or its shape's next layout, and a
/// server this process runs (`serve::serve`) to shut down. What a stopped search returns is
/// incomplete and must be discarded by its caller; new searches stop at once too until
/// [`resume`] is called. For a host that turns Ctrl-C into a stop, such as the Python package.
pub fn interrupt() {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether [`interrupt`] was called and not yet followed by [`resume`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Lets searches run to their end again, after an [`interrupt`] whose search has returned.
pub fn resume() {
    INTERRUPTED.store(false, std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A computation its caller has cancelled.
    struct Cancelled;

    impl Progress for Cancelled {
        fn cancelled(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_cancelled_computation_sees_no_more_items() {
        assert!(stopping(&Cancelled));
        assert_eq!(until_stopped(1..4, &Cancelled).count(), 0);
        assert_eq!(until_stopped(1..4, &Silent).sum::<i32>(), 6);
    }
}
