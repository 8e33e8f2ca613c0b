//! `trainplan serve`: the plate in a browser. One self-contained page (embedded in the binary:
//! no CDN, no build step) and a small JSON API over the library, whose plan objects are the
//! command line's JSON contract:
//!
//! - `GET /` — the workshop page.
//! - `GET /api/presets` — the models, the GPU presets and the default brief.
//! - `POST /api/check` — grade one design: `{"model", "tokens", "tp", "pp", "zero", "brief"}`
//!   gives exactly what `trainplan check --json` prints for the same design; with
//!   `"sensitivity": true`, what `check --json --sensitivity` prints; with a `"stack"`, under
//!   the detailed models, where `"cp"`, `"replicate"` and `"precision"` may be given too.
//! - `POST /api/search` — the best passing plans and the Pareto front:
//!   `{"models", "top", "rank", "brief"}` gives `{"search": …, "front": …}`, the documents of
//!   `search --json` and `search --pareto`; with a `"stack"`, the detailed search, over the
//!   lists `"cp"`, `"replicate"` and `"precisions"` when given.
//! - `POST /api/export` — a design and a `format` (`megatron`, `deepspeed`, `torchtitan`)
//!   gives the launcher configuration `trainplan export` writes.
//!
//! Safe by default: bound to loopback unless told otherwise, and then answering only requests
//! addressed to this machine's own names for it (no DNS rebinding), with one `Host` field
//! (two, or none in HTTP/1.1, are refused with status 400); bodies JSON (`application/json`,
//! so other sites' pages cannot post without a preflight that is never granted) of at most
//! [`MAX_BODY`] bytes (one declared larger is refused with status 413 before it is read);
//! every field checked by the same rules as the command line, unknown fields refused, a
//! brief's `family` refused where the request names its models, errors one line as
//! `{"error": …}` with status 400; searches bounded in size (at most [`MAX_MODELS`] models and
//! [`MAX_TOP`] plans, the default token grid, the plate models) and in time
//! ([`SEARCH_TIMEOUT`]), at most [`MAX_SEARCHES`] at once and [`MAX_SEARCHES_PER_CLIENT`] for
//! one client (429 beyond). A search answered 503 past its time, or whose client closes the
//! connection, is stopped within a layout's weighing (its
//! [`Progress`](crate::search::progress::Progress) is cancelled), and gives back its place:
//! the 503 is sent once it has.
//!
//! Slow requests are not waited on for ever. A request head (the request line and the
//! headers) must arrive within [`HEADER_TIMEOUT`] of the connection opening, or of the last
//! answer on a kept-alive connection: past it, a head begun is answered with status 408 and
//! the one-line error, and the connection is closed (an idle connection is closed without a
//! word). A body must arrive within [`BODY_TIMEOUT`] of the handler starting to read it, or
//! it is answered with status 408 and the one-line error, and the connection is closed. Both
//! are [`Limits`], far past anything a person at the page waits for.

mod api;
mod body;
mod limits;
mod timeouts;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;

use crate::error::{Error, Result};
use crate::search::progress;

pub use api::{api_check, api_export, api_presets, api_search};
pub use limits::{
    Limits, BODY_TIMEOUT, HEADER_TIMEOUT, MAX_BODY, MAX_MODELS, MAX_SEARCHES,
    MAX_SEARCHES_PER_CLIENT, MAX_TOP, SEARCH_TIMEOUT,
};

use api::run_search;
use body::{answer, failure, JsonBody};
use limits::{Peer, Searches};
use timeouts::TimedListener;

/// The page, with its styles and script inline.
const PAGE: &str = include_str!("../../assets/workshop.html");

/// The router: the page and the API, over the shared search limiter; requests whose `Host`
/// is not one of `hosts` are refused (none: any), which stops another site's page from
/// reaching a loopback server by rebinding its DNS name to 127.0.0.1.
pub fn router(hosts: Option<Vec<String>>) -> Router {
    router_with(hosts, Limits::default())
}

/// [`router`] with other limits on searching.
pub fn router_with(hosts: Option<Vec<String>>, limits: Limits) -> Router {
    let searches = Searches::new(limits);
    let hosts = Arc::new(hosts);
    Router::new()
        .route(
            "/",
            get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }),
        )
        .route("/api/presets", get(|| async { answer(api_presets()) }))
        .route(
            "/api/check",
            post(|JsonBody(b): JsonBody| async move { answer(api_check(&b)) }),
        )
        .route(
            "/api/export",
            post(|JsonBody(b): JsonBody| async move {
                match api_export(&b) {
                    Ok((text, media)) => ([(header::CONTENT_TYPE, media)], text).into_response(),
                    Err(e) => failure(StatusCode::BAD_REQUEST, &e.to_string()),
                }
            }),
        )
        .route("/api/search", post(run_search))
        .method_not_allowed_fallback(|| async {
            failure(
                StatusCode::METHOD_NOT_ALLOWED,
                "GET / and /api/presets; POST the other /api/ routes",
            )
        })
        .fallback(|| async {
            failure(StatusCode::NOT_FOUND, "no such page: try / or /api/presets")
        })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(
            move |request: Request, next: Next| {
                let hosts = Arc::clone(&hosts);
                async move {
                    match host(&request, hosts.as_deref()) {
                        Ok(()) => next.run(request).await,
                        Err((status, message)) => failure(status, &message),
                    }
                }
            },
        ))
        .with_state(searches)
}

/// Refuses a request whose `Host` is not one of `hosts` (none: any) with 403, and one whose
/// `Host` is not one field of visible ASCII (two of them, or none on an HTTP/1.1 request) with
/// 400, as RFC 9112 §3.2 asks: two could say two hosts, one checked and the other obeyed by
/// whatever stands between.
fn host(
    request: &Request,
    hosts: Option<&[String]>,
) -> std::result::Result<(), (StatusCode, String)> {
    let fields: Vec<_> = request.headers().get_all(header::HOST).iter().collect();
    let bad = |value: String, expected: &str| {
        (
            StatusCode::BAD_REQUEST,
            Error::invalid("Host", value, expected).to_string(),
        )
    };
    let host = match fields[..] {
        [one] => one.to_str().ok().filter(|h| !h.is_empty()).ok_or_else(|| {
            bad(
                format!("{:?}", one.as_bytes().escape_ascii().to_string()),
                "a host name of visible ASCII, such as localhost:8080",
            )
        })?,
        [] if request.version() == axum::http::Version::HTTP_10 => "",
        [] => return Err(bad("none".into(), "one Host header (HTTP/1.1 asks for it)")),
        _ => {
            let values: Vec<String> = fields
                .iter()
                .map(|v| v.as_bytes().escape_ascii().to_string())
                .collect();
            return Err(bad(
                format!("{} headers: {}", fields.len(), values.join(", ")),
                "one Host header",
            ));
        }
    };
    // Host names are case-insensitive; the port, digits, is compared exactly all the same.
    match hosts {
        Some(allowed) if !allowed.iter().any(|a| a.eq_ignore_ascii_case(host)) => Err((
            StatusCode::FORBIDDEN,
            format!(
                "this server answers requests for {} only",
                allowed.join(", ")
            ),
        )),
        _ => Ok(()),
    }
}

/// Serves on `address` until Ctrl-C, or until [`progress::interrupt`] (the Python package's
/// stop); `ready` is told the address bound (port 0 picks one).
pub fn serve(address: SocketAddr, ready: impl FnOnce(SocketAddr)) -> Result<()> {
    let io = |source: std::io::Error| Error::Io {
        action: "serve on",
        path: address.to_string().into(),
        source,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(io)?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(address).await.map_err(io)?;
        ready(listener.local_addr().map_err(io)?);
        serve_on(listener, Limits::default(), async {
            // A Ctrl-C on the terminal, or a stop from the process hosting the server (the
            // Python package turns a KeyboardInterrupt, however raised, into one), looked for
            // every 50 ms.
            let interrupted = async {
                let mut every = tokio::time::interval(Duration::from_millis(50));
                while !progress::interrupted() {
                    every.tick().await;
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = interrupted => {}
            }
        })
        .await
        .map_err(io)
    })
}

/// Serves [`router_with`] `limits` on `listener` until `shutdown` completes, request heads
/// timed by the limits. On loopback it answers only requests for this machine's own names for
/// it (`127.0.0.1`, `localhost`, `[::1]`, with the port bound); elsewhere the user chose to
/// expose the server, under whatever name reaches it.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let bound = listener.local_addr()?;
    let hosts = bound.ip().is_loopback().then(|| {
        let port = bound.port();
        vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ]
    });
    let listener = TimedListener {
        listener,
        timeout: limits.header_timeout,
    };
    let router = router_with(hosts, limits).into_make_service_with_connect_info::<Peer>();
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}
