//! What each thread keeps from shape to shape and search to search: its buffers
//! ([`Buffers`]) and its weighing scratch ([`Scratch`]), thread-locals emptied or worked out
//! again before they are read, so no heap allocation is made per configuration.

use crate::cost::memory::MemoryModel;
use crate::cost::step::{Schedule, Step};
use crate::cost::step_time::micro_batch::MicroBatchCache;
use crate::plan::pace::Pace;
use crate::search::space::Config;
use crate::search::weigh::bounds::OverCap;
use crate::search::weigh::shared::Shared;

/// A worker's room for a shape's kept configurations and slower depths ([`Weighed`]), reused
/// from shape to shape and, on each thread, from search to search ([`Buffers::take`]).
#[derive(Default)]
pub(crate) struct Buffers {
    pub(crate) configs: Vec<Config>,
    pub(crate) slower: Vec<f64>,
}

/// The most a thread keeps in its [`Buffers`] between shapes, bytes: a search of huge shapes
/// lets its larger buffers go rather than hold them for the process's life.
const MAX_KEPT_BYTES: usize = 64 << 20;

thread_local! {
    /// Each thread's [`Buffers`], between the shapes it searches.
    static BUFFERS: std::cell::RefCell<Buffers> = std::cell::RefCell::default();
    /// Each thread's [`Scratch`], between the shapes it weighs.
    pub(crate) static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

impl Buffers {
    /// This thread's buffers, as its last shape left them (empty the first time), so a search
    /// repeated in one process (the Python package, the workshop's server, a bench) neither
    /// grows them again nor has the system take their pages back and fault them in again.
    pub(crate) fn take() -> Buffers {
        BUFFERS.with_borrow_mut(std::mem::take)
    }

    /// Keeps these buffers for this thread's next shape (not beyond [`MAX_KEPT_BYTES`]).
    pub(crate) fn keep(self) {
        let bytes = self.configs.capacity() * std::mem::size_of::<Config>()
            + self.slower.capacity() * std::mem::size_of::<f64>();
        if bytes <= MAX_KEPT_BYTES {
            BUFFERS.with_borrow_mut(|b| *b = self);
        }
    }
}

/// A configuration of the layout being weighed that fits and is kept
/// ([`weighed_configurations`]): its step's place, its memory and its pace (with the layout and
/// the step, its [`Config`]).
pub(crate) struct Kept {
    pub(crate) place: u32,
    pub(crate) bytes: f64,
    pub(crate) pace: Pace,
}

/// Whether `model`'s step interleaves: one of its step's depths beside the 1F1B step.
pub(crate) fn is_depth(model: &MemoryModel) -> bool {
    model
        .step()
        .is_some_and(|s| s.schedule != Schedule::OneFOneB)
}

/// What [`weighed_configurations`] works in while it weighs a shape, kept on each thread from
/// shape to shape and search to search, as [`Buffers`] are: each holds no more than one set of
/// degrees' steps and slots (a few thousand at most), so it is kept whole.
#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) shared: Shared,
    /// The layout's steps, those the batch rule refused, and room to build them.
    pub(crate) steps: Vec<Step>,
    pub(crate) refused: Vec<Step>,
    pub(crate) extra: Vec<Step>,
    /// The steps as memory models, each configuration's own.
    pub(crate) models: Vec<MemoryModel>,
    /// The layout's kept configurations, while its slower depths are found.
    pub(crate) kept: Vec<Kept>,
    pub(crate) over: OverCap,
    pub(crate) cache: MicroBatchCache,
}
