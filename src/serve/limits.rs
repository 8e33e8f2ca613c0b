//! How much the server takes on: the bounds on bodies, searches and their time, and how long
//! it waits for a request to arrive.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

/// Largest request body, bytes.
pub const MAX_BODY: usize = 64 * 1024;
/// Most models one search may name.
pub const MAX_MODELS: usize = 16;
/// Most plans one search may list.
pub const MAX_TOP: usize = 100;
/// Longest a search may run before the request is answered with an error.
pub const SEARCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Most searches running at once; more are refused with status 429.
pub const MAX_SEARCHES: usize = 2;
/// Longest a request head may take to arrive (from the connection opening, or from the last
/// answer on a kept-alive connection); past it the connection is closed.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a request body may take to arrive once its handler reads it; past it the request
/// is answered with status 408.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How much a server takes on: searches at once and how long each may run, and how long it
/// waits for a request to arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Searches running at once; more are refused with status 429.
    pub searches: usize,
    /// Longest a search may run before the request is answered with status 503.
    pub timeout: Duration,
    /// Longest a request head may take to arrive before the connection is closed (a head
    /// begun is first answered with status 408). Only [`serve_on`](crate::serve::serve_on) times heads: a bare
    /// [`router_with`](crate::serve::router_with) never sees a request before its head has arrived.
    pub header_timeout: Duration,
    /// Longest a request body may take to arrive before the request is answered with status
    /// 408.
    pub body_timeout: Duration,
}

impl Default for Limits {
    /// [`MAX_SEARCHES`] at once, each within [`SEARCH_TIMEOUT`]; heads within
    /// [`HEADER_TIMEOUT`], bodies within [`BODY_TIMEOUT`].
    fn default() -> Self {
        Limits {
            searches: MAX_SEARCHES,
            timeout: SEARCH_TIMEOUT,
            header_timeout: HEADER_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
        }
    }
}

/// The searches running, against the server's limits (which the other handlers read too).
pub(super) struct Searches {
    pub(super) permits: Arc<Semaphore>,
    pub(super) limits: Limits,
}
