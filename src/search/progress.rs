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
}

/// Progress that goes nowhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {}
