//! How much the server takes on: the bounds on bodies, searches and their time, and how long
//! it waits for a request to arrive; which searches run, at most so many at once and so many
//! from one client.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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
/// Most searches running at once for one client (one IPv4 address, one IPv6 /64 network); more
/// are refused with status 429, so that one client cannot take every place.
pub const MAX_SEARCHES_PER_CLIENT: usize = 1;
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
    /// Searches running at once for one client: one IPv4 address, or one IPv6 /64 network
    /// (what one machine is given); more are refused with status 429. Served without the
    /// peers' addresses (a bare [`router_with`](crate::serve::router_with) under
    /// `axum::serve`, without `into_make_service_with_connect_info`), all requests count as
    /// one client.
    pub per_client: usize,
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
    /// [`MAX_SEARCHES`] at once, [`MAX_SEARCHES_PER_CLIENT`] of them from one client, each
    /// within [`SEARCH_TIMEOUT`]; heads within [`HEADER_TIMEOUT`], bodies within
    /// [`BODY_TIMEOUT`].
    fn default() -> Self {
        Limits {
            searches: MAX_SEARCHES,
            per_client: MAX_SEARCHES_PER_CLIENT,
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
    /// The searches running for each client that runs any.
    clients: Mutex<HashMap<Client, usize>>,
}

impl Searches {
    /// No search running, under `limits`.
    pub(super) fn new(limits: Limits) -> Arc<Searches> {
        Arc::new(Searches {
            permits: Arc::new(Semaphore::new(limits.searches)),
            limits,
            clients: Mutex::new(HashMap::new()),
        })
    }

    /// A place for a search of `client`, held until the [`Slot`] is dropped; or why there is
    /// none (the error of a 429 answer): the client runs as many as one may, or the server
    /// as many as it may.
    pub(super) fn admit(self: &Arc<Searches>, client: Client) -> Result<Slot, String> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let running = clients.get(&client).copied().unwrap_or(0);
        if running >= self.limits.per_client {
            return Err(format!(
                "{client} already runs {running} search{}, as many as one client may at once; \
                 try again when it has finished",
                if running == 1 { "" } else { "es" }
            ));
        }
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            return Err(format!(
                "{} searches are running; try again when one has finished",
                self.limits.searches
            ));
        };
        clients.insert(client, running + 1);
        Ok(Slot {
            _permit: permit,
            searches: Arc::clone(self),
            client,
        })
    }

    /// The searches `client` runs now.
    #[cfg(test)]
    pub(super) fn running(&self, client: Client) -> usize {
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.get(&client).copied().unwrap_or(0)
    }
}

/// A search's place among those running: given back when dropped, which is when the search's
/// work has ended (run to its end, or stopped).
pub(super) struct Slot {
    _permit: OwnedSemaphorePermit,
    searches: Arc<Searches>,
    client: Client,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut clients = self
            .searches
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = clients.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                clients.remove(&self.client);
            }
        }
    }
}

/// The peer of a connection, as `serve_on`'s listener gives it to the handlers
/// (`ConnectInfo<Peer>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Peer(pub(super) SocketAddr);

/// Who a search is counted against: an IPv4 address, an IPv6 /64 network (one machine is
/// commonly given a whole /64, so its addresses count as one), or, where the server is not told
/// its peers, every request as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Client {
    V4(std::net::Ipv4Addr),
    V6Network(std::net::Ipv6Addr),
    Unknown,
}

impl Client {
    /// The client at `address` (none: [`Client::Unknown`]); an IPv4 address mapped into IPv6
    /// is the IPv4 one.
    pub(super) fn of(address: Option<IpAddr>) -> Client {
        match address.map(|a| a.to_canonical()) {
            Some(IpAddr::V4(v4)) => Client::V4(v4),
            Some(IpAddr::V6(v6)) => {
                let network = u128::from(v6) & !((1u128 << 64) - 1);
                Client::V6Network(network.into())
            }
            None => Client::Unknown,
        }
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Client::V4(a) => write!(f, "{a}"),
            Client::V6Network(n) => write!(f, "{n}/64"),
            Client::Unknown => {
                f.write_str("this server's one client (it is not told their addresses)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_an_ipv4_address_or_an_ipv6_network() {
        let client = |s: &str| Client::of(Some(s.parse().unwrap()));
        assert_eq!(client("127.0.0.1").to_string(), "127.0.0.1");
        assert_eq!(client("::ffff:127.0.0.1"), client("127.0.0.1"));
        assert_eq!(client("2001:db8::1"), client("2001:db8::ffff:2"));
        assert_ne!(client("2001:db8::1"), client("2001:db8:0:1::1"));
        assert_eq!(client("2001:db8::1").to_string(), "2001:db8::/64");
        assert_eq!(Client::of(None), Client::Unknown);
    }

    #[test]
    fn one_client_holds_at_most_its_share_of_the_places() {
        let searches = Searches::new(Limits::default());
        let (a, b, c) = (
            Client::of(Some("10.0.0.1".parse().unwrap())),
            Client::of(Some("10.0.0.2".parse().unwrap())),
            Client::of(Some("10.0.0.3".parse().unwrap())),
        );
        let first = searches.admit(a).unwrap();
        assert_eq!(
            searches.admit(a).err().unwrap(),
            "10.0.0.1 already runs 1 search, as many as one client may at once; try again when it has finished"
        );
        let second = searches.admit(b).unwrap();
        assert_eq!(
            searches.admit(c).err().unwrap(),
            "2 searches are running; try again when one has finished"
        );
        assert_eq!(searches.running(a), 1);
        drop(first);
        assert_eq!(searches.running(a), 0);
        let _third = searches.admit(c).unwrap();
        drop(second);
        let _again = searches.admit(a).unwrap();
    }
}
