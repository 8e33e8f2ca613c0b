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
//! addressed to this machine's own names for it (no DNS rebinding); bodies JSON
//! (`application/json`, so other sites' pages cannot post without a preflight that is never
//! granted) of at most [`MAX_BODY`] bytes; every field checked by the same rules as the command line, unknown fields refused,
//! errors one line as `{"error": …}` with status 400; searches bounded in size (at most
//! [`MAX_MODELS`] models and [`MAX_TOP`] plans, the default token grid, the plate models) and
//! in time ([`SEARCH_TIMEOUT`]), at most [`MAX_SEARCHES`] at once.
//!
//! Slow requests are not waited on for ever. A request head (the request line and the
//! headers) must arrive within [`HEADER_TIMEOUT`] of the connection opening, or of the last
//! answer on a kept-alive connection: past it, a head begun is answered with status 408 and
//! the one-line error, and the connection is closed (an idle connection is closed without a
//! word). A body must arrive within [`BODY_TIMEOUT`] of the handler starting to read it, or
//! it is answered with status 408 and the one-line error, and the connection is closed. Both
//! are [`Limits`], far past anything a person at the page waits for.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Semaphore;

use crate::brief::gpu::PRESETS;
use crate::brief::{Brief, BriefPatch};
use crate::cost::memory::MemoryModel;
use crate::cost::run::TimeModel;
use crate::cost::step::detailed::{Detailed, Options};
use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Stack;
use crate::cost::step::Step;
use crate::cost::step_time::options::TimeOptions;
use crate::error::{Error, Result};
use crate::input::parse_json;
use crate::model::layout::{Degrees, Layout, ZeroStage};
use crate::model::{self, Shape};
use crate::plan::check::{check, CheckReport};
use crate::plan::Design;
use crate::report::export::{Exporter, Format, Json, Launch};
use crate::search::progress::Silent;
use crate::search::rank::{Distinct, Rank};
use crate::search::{search, searchable_precision, MemorySpace, ParallelSpace, SearchOptions};

/// The page, with its styles and script inline.
const PAGE: &str = include_str!("../assets/workshop.html");
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
    /// begun is first answered with status 408). Only [`serve_on`] times heads: a bare
    /// [`router_with`] never sees a request before its head has arrived.
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
struct Searches {
    permits: Arc<Semaphore>,
    limits: Limits,
}

/// A design as the page sends it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DesignRequest {
    /// A preset or a dimension name (`70b`, `L80-h8192-f28672`).
    model: String,
    /// Training tokens, a whole number.
    #[serde(deserialize_with = "crate::brief::whole")]
    tokens: Option<u64>,
    #[serde(default = "one", deserialize_with = "crate::brief::whole")]
    tp: Option<u64>,
    #[serde(default = "one", deserialize_with = "crate::brief::whole")]
    pp: Option<u64>,
    #[serde(default)]
    zero: ZeroStage,
    /// A software stack: graded under the detailed memory and time models with that stack's
    /// settings and the default step (micro-batch 1, full recomputation, 1F1B) [default: the
    /// plate].
    #[serde(default)]
    stack: Option<Stack>,
    /// Context-parallel degree, with a stack [default: 1].
    #[serde(default = "one", deserialize_with = "crate::brief::whole")]
    cp: Option<u64>,
    /// Hybrid-sharding replicas of the data-parallel group, with a stack [default: 1].
    #[serde(default = "one", deserialize_with = "crate::brief::whole")]
    replicate: Option<u64>,
    /// Precision of the matrix products, with a stack [default: bf16].
    #[serde(default)]
    precision: Precision,
    /// Fields of the brief over the default, as a `--brief` file gives them.
    #[serde(default)]
    brief: BriefPatch,
}

fn one() -> Option<u64> {
    Some(1)
}

/// A search request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchRequest {
    /// Presets or dimension names [default: the three presets].
    #[serde(default)]
    models: Vec<String>,
    /// How many plans to list [default: 10].
    #[serde(default)]
    top: Option<usize>,
    /// `loss`, `days` or `memory` [default: loss].
    #[serde(default)]
    rank: Option<String>,
    /// `plan`, `layout` or `shape`: what a listed row stands for, as `search --distinct`
    /// [default: layout; named, it thins the front too].
    #[serde(default)]
    distinct: Option<String>,
    /// A software stack: searched under the detailed memory and time models with that stack's
    /// settings and the default steps [default: the plate].
    #[serde(default)]
    stack: Option<Stack>,
    /// Context-parallel degrees to search, with a stack [default: 1 and each power of two
    /// leaving every rank 4,096 tokens or more].
    #[serde(default)]
    cp: Vec<u64>,
    /// Hybrid-sharding replica counts to search, with a stack [default: 1].
    #[serde(default)]
    replicate: Vec<u64>,
    /// Precisions to search, with a stack [default: bf16].
    #[serde(default)]
    precisions: Vec<Precision>,
    #[serde(default)]
    brief: BriefPatch,
}

/// Refuses a field that only the detailed models grade when the request names no stack.
fn needs_stack(
    stack: Option<Stack>,
    field: &str,
    value: impl std::fmt::Display,
    plain: bool,
) -> Result<()> {
    if stack.is_none() && !plain {
        return Err(Error::invalid(
            field,
            value,
            "its default unless a stack is named: the detailed models grade it",
        ));
    }
    Ok(())
}

/// The brief a request's patch gives over the default, validated.
fn brief(patch: BriefPatch) -> Result<Brief> {
    let brief = patch.apply(Brief::default());
    brief.validate()?;
    Ok(brief)
}

/// The graded design of a request, with its sensitivity when `sensitivity` asks.
fn grade(request: DesignRequest, sensitivity: bool) -> Result<CheckReport> {
    let brief = brief(request.brief)?;
    let shape = model::preset(&request.model)?;
    let (tp, pp) = (request.tp.unwrap_or(1), request.pp.unwrap_or(1));
    let (cp, replicate) = (request.cp.unwrap_or(1), request.replicate.unwrap_or(1));
    needs_stack(request.stack, "cp", cp, cp == 1)?;
    needs_stack(request.stack, "replicate", replicate, replicate == 1)?;
    let precision = request.precision;
    needs_stack(
        request.stack,
        "precision",
        precision,
        precision == Precision::Bf16,
    )?;
    let degrees = Degrees {
        ep: 1,
        etp: None,
        tp,
        cp,
        pp,
        replicate,
    };
    let layout = Layout::with(&brief, &shape, degrees, request.zero)?;
    let tokens = request.tokens.filter(|&d| d >= 1).ok_or_else(|| {
        Error::invalid("tokens", request.tokens.unwrap_or(0), "a whole number ≥ 1")
    })?;
    let (memory, time) = match request.stack {
        None => (MemoryModel::Plate, TimeModel::Plate),
        Some(stack) => (
            MemoryModel::Detailed(Detailed {
                step: Step {
                    precision,
                    ..Step::default_for(&layout, brief.seq_len, &brief.batch_target(), stack)?
                },
                options: Options::for_stack(stack),
            }),
            TimeModel::Detailed(TimeOptions::for_stack(stack)),
        ),
    };
    let design = Design {
        shape: &shape,
        tokens,
        layout,
        memory,
        time: &time,
    };
    let mut report = check(&brief, &design)?;
    if sensitivity {
        report.sensitivity = Some(crate::plan::sensitivity::sensitivity(&brief, &design)?);
    }
    Ok(report)
}

/// `POST /api/check`: a design, and `"sensitivity": true` for its sensitivity table.
pub fn api_check(body: &[u8]) -> Result<String> {
    // `sensitivity` is taken out first, so the design's fields keep their names in errors
    // and an export, whose request has no such field, still refuses it.
    let mut value: serde_json::Value = parse(body, "a design")?;
    let sensitivity = match value.as_object_mut().and_then(|o| o.remove("sensitivity")) {
        None => false,
        Some(serde_json::Value::Bool(b)) => b,
        Some(other) => return Err(Error::invalid("sensitivity", other, "true or false")),
    };
    let report = grade(
        parse(value.to_string().as_bytes(), "a design")?,
        sensitivity,
    )?;
    Json.check(&report)
}

/// `POST /api/export`: a design's fields and `format`. The answer is the configuration and its
/// media type.
pub fn api_export(body: &[u8]) -> Result<(String, &'static str)> {
    // `format` is taken out first, so the design's fields keep their names in errors.
    let mut value: serde_json::Value = parse(body, "an export request")?;
    let format = value
        .as_object_mut()
        .and_then(|o| o.remove("format"))
        .ok_or_else(|| Error::invalid("format", "missing", "megatron, deepspeed or torchtitan"))?;
    let Some(format) = Format::launcher_named(format.as_str().unwrap_or("")) else {
        return Err(Error::invalid(
            "format",
            format,
            "megatron, deepspeed or torchtitan",
        ));
    };
    let design: DesignRequest = parse(value.to_string().as_bytes(), "a design")?;
    let report = grade(design, false)?;
    let exporter = format.exporter();
    let text = exporter.launch(&Launch::from_check(&report)?)?;
    Ok((text, exporter.media_type()))
}

/// `POST /api/search`, bounded in size.
pub fn api_search(body: &[u8]) -> Result<String> {
    let request: SearchRequest = parse(body, "a search request")?;
    if request.brief.family.is_some() {
        return Err(Error::invalid(
            "brief.family",
            "a shape family",
            "no family: the workshop searches named models (trainplan search takes families)",
        ));
    }
    let brief = brief(request.brief)?;
    if request.models.len() > MAX_MODELS {
        return Err(Error::invalid(
            "models",
            format!("{} models", request.models.len()),
            format!("at most {MAX_MODELS}"),
        ));
    }
    let mut shapes: Vec<Shape> = Vec::new();
    if request.models.is_empty() {
        shapes = model::presets();
    }
    for name in &request.models {
        Shape::push_new(&mut shapes, model::preset(name)?);
    }
    let top = request.top.unwrap_or(10);
    if !(1..=MAX_TOP).contains(&top) {
        return Err(Error::invalid("top", top, format!("1 to {MAX_TOP}")));
    }
    let rank = Rank::from_name("rank", request.rank.as_deref().unwrap_or("loss"))?;
    rank.check_against("rank", &brief)?;
    let distinct = match request.distinct.as_deref() {
        Some(name) => Distinct::from_name("distinct", name)?,
        None => Distinct::Layout,
    };
    let mut options = SearchOptions {
        rank,
        top: Some(top),
        distinct,
        distinct_front: request.distinct.is_some(),
        ..SearchOptions::default()
    };
    for (field, list) in [("cp", &request.cp), ("replicate", &request.replicate)] {
        needs_stack(request.stack, field, format!("{list:?}"), list.is_empty())?;
        if let Some(&bad) = list
            .iter()
            .find(|&&x| x == 0 || x > crate::brief::limits::GPUS)
        {
            return Err(Error::invalid(
                field,
                bad,
                format!("whole numbers from 1 to {}", crate::brief::limits::GPUS),
            ));
        }
    }
    needs_stack(
        request.stack,
        "precisions",
        format!("{:?}", request.precisions),
        request.precisions.is_empty(),
    )?;
    if let Some(stack) = request.stack {
        crate::cost::chip::stack_chip(&brief.machine(), stack)?;
        for &p in &request.precisions {
            searchable_precision(&brief, stack, p)?;
        }
        let (mut cps, mut replicates) = (request.cp.clone(), request.replicate.clone());
        cps.sort_unstable();
        cps.dedup();
        replicates.sort_unstable();
        replicates.dedup();
        options.memory = MemorySpace::detailed_defaults(&brief, Options::for_stack(stack))
            .with_parallel(
                &request.precisions,
                ParallelSpace {
                    cps,
                    replicates,
                    experts: Default::default(),
                },
            );
        options.time = TimeModel::Detailed(TimeOptions::for_stack(stack));
    }
    let report = search(&brief, &shapes, &options, &Silent);
    Ok(format!(
        "{{\"search\": {}, \"front\": {}}}\n",
        Json.search(&report)?.trim_end(),
        Json.front(&report)?.trim_end()
    ))
}

/// `GET /api/presets`.
pub fn api_presets() -> Result<String> {
    let models: Vec<_> = model::presets()
        .into_iter()
        .map(|s| {
            json!({
                "name": s.name,
                "short": s.name.strip_prefix("llama3-").unwrap_or(&s.name),
                "params": s.params(),
                "layers": s.layers,
                "heads": s.heads,
                "kv_heads": s.kv_heads,
            })
        })
        .collect();
    let value = json!({
        "models": models,
        "gpus": PRESETS,
        "brief": Brief::default(),
    });
    serde_json::to_string_pretty(&value)
        .map_err(|e| Error::invalid("presets", "JSON", e.to_string()))
}

/// A request body as `T`: UTF-8 JSON, errors naming the field's path.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8], kind: &str) -> Result<T> {
    let text = std::str::from_utf8(body)
        .map_err(|_| Error::invalid("body", "bytes that are not UTF-8", "UTF-8 JSON"))?;
    parse_json(text, std::path::Path::new("request"), kind)
}

/// A JSON answer, or the error as `{"error": …}` with status 400.
fn answer(result: Result<String>) -> Response {
    match result {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => failure(StatusCode::BAD_REQUEST, &e.to_string()),
    }
}

/// An error as one line of JSON, `{"error": …}`, with `status`.
fn failure(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        error_line(message),
    )
        .into_response()
}

/// The body of an error answer: `{"error": …}` and a line break.
fn error_line(message: &str) -> String {
    format!("{}\n", json!({ "error": message }))
}

/// A duration in seconds, as errors give it.
fn seconds(duration: Duration) -> String {
    crate::format::general(duration.as_secs_f64())
}

/// A request body, read only if it is JSON, within [`MAX_BODY`] and arrived within the
/// limits' body time; else the error to answer (415, 413, 408 or 400).
struct JsonBody(Bytes);

impl FromRequest<Arc<Searches>> for JsonBody {
    type Rejection = Response;

    async fn from_request(
        request: Request,
        state: &Arc<Searches>,
    ) -> std::result::Result<Self, Response> {
        let json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(';')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
            });
        if !json {
            // Also what keeps other sites' pages from posting here: a cross-site request with
            // this type needs a preflight, which this server never grants.
            return Err(failure(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a request body of type application/json",
            ));
        }
        let limit = state.limits.body_timeout;
        match tokio::time::timeout(limit, Bytes::from_request(request, state)).await {
            Ok(Ok(bytes)) => Ok(JsonBody(bytes)),
            Ok(Err(rejection)) => Err(failure(rejection.status(), &rejection.body_text())),
            Err(_) => {
                let mut response = failure(
                    StatusCode::REQUEST_TIMEOUT,
                    &format!(
                        "the request body did not arrive within {} s",
                        seconds(limit)
                    ),
                );
                // The rest of the body may still come: the connection cannot carry another
                // request.
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                Err(response)
            }
        }
    }
}

/// The router: the page and the API, over the shared search limiter; requests whose `Host`
/// is not one of `hosts` are refused (none: any), which stops another site's page from
/// reaching a loopback server by rebinding its DNS name to 127.0.0.1.
pub fn router(hosts: Option<Vec<String>>) -> Router {
    router_with(hosts, Limits::default())
}

/// [`router`] with other limits on searching.
pub fn router_with(hosts: Option<Vec<String>>, limits: Limits) -> Router {
    let searches = Arc::new(Searches {
        permits: Arc::new(Semaphore::new(limits.searches)),
        limits,
    });
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
                    let host = request
                        .headers()
                        .get(header::HOST)
                        .and_then(|h| h.to_str().ok())
                        .unwrap_or("");
                    // Host names are case-insensitive; the port, digits, is compared exactly
                    // all the same.
                    match hosts.as_ref() {
                        Some(allowed) if !allowed.iter().any(|a| a.eq_ignore_ascii_case(host)) => {
                            failure(
                                StatusCode::FORBIDDEN,
                                &format!(
                                    "this server answers requests for {} only",
                                    allowed.join(", ")
                                ),
                            )
                        }
                        _ => next.run(request).await,
                    }
                }
            },
        ))
        .with_state(searches)
}

/// A search on a blocking thread, at most so many at once, answered within the limits' time
/// (status 429 past the first, 503 past the second; a search past its time still runs to its
/// end on its thread, holding its place among those at once).
async fn run_search(State(searches): State<Arc<Searches>>, JsonBody(body): JsonBody) -> Response {
    let limits = searches.limits;
    let Ok(permit) = Arc::clone(&searches.permits).try_acquire_owned() else {
        return failure(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "{} searches are running; try again when one has finished",
                limits.searches
            ),
        );
    };
    let work = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        api_search(&body)
    });
    match tokio::time::timeout(limits.timeout, work).await {
        Ok(Ok(result)) => answer(result),
        Ok(Err(_)) => failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the search stopped unexpectedly",
        ),
        Err(_) => failure(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the search took longer than {} s", seconds(limits.timeout)),
        ),
    }
}

/// Serves on `address` until Ctrl-C; `ready` is told the address bound (port 0 picks one).
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
            let _ = tokio::signal::ctrl_c().await;
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
    axum::serve(listener, router_with(hosts, limits))
        .with_graceful_shutdown(shutdown)
        .await
}

/// A TCP listener whose connections time the arrival of request heads.
///
/// `axum::serve` offers no header timeout (hyper's needs a timer, which it does not set), so
/// the connection does it: it watches the bytes read for the blank line that ends a head,
/// and while a head is awaited, a read past the deadline fails, which ends the connection.
struct TimedListener {
    listener: tokio::net::TcpListener,
    timeout: Duration,
}

impl axum::serve::Listener for TimedListener {
    type Io = TimedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TimedStream, SocketAddr) {
        // The TCP listener's own accept, which retries past failed connections.
        let (stream, address) = axum::serve::Listener::accept(&mut self.listener).await;
        let stream = TimedStream {
            stream,
            timeout: self.timeout,
            deadline: Box::pin(tokio::time::sleep(self.timeout)),
            phase: Phase::head(),
        };
        (stream, address)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// Where a connection stands, for the header timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Awaiting a request head (the first, or the next on a kept-alive connection), by the
    /// deadline: `begun` once a byte of it other than a line break has come (line breaks
    /// before a request line are skipped, as by the parser), `blank` at the start of a line.
    Head { begun: bool, blank: bool },
    /// A head has come: its body and its answer are the handler's to time.
    Message,
    /// The deadline passed: the connection is done.
    Expired,
}

impl Phase {
    fn head() -> Phase {
        Phase::Head {
            begun: false,
            blank: false,
        }
    }

    /// The phase after `bytes` are read: a head ends at a blank line (`\r\n\r\n`, or bare
    /// line feeds, which the parser also takes).
    fn read(self, bytes: &[u8]) -> Phase {
        let Phase::Head {
            mut begun,
            mut blank,
        } = self
        else {
            return self;
        };
        for &b in bytes {
            match b {
                b'\n' if begun && blank => return Phase::Message,
                b'\n' if begun => blank = true,
                b'\n' | b'\r' => {}
                _ => (begun, blank) = (true, false),
            }
        }
        Phase::Head { begun, blank }
    }

    /// Whether `bytes` written re-arm the deadline: an answer (not an interim `1xx` one, such
    /// as `100 Continue`, which comes before the body) ends the message, so the next head is
    /// awaited; writes while no byte of it has come (a long answer to a slow reader) count
    /// from the last of them.
    fn rearms(self, bytes: &[u8]) -> bool {
        let interim = bytes.starts_with(b"HTTP/1.") && bytes.get(9) == Some(&b'1');
        match self {
            Phase::Message => !interim,
            Phase::Head { begun, .. } => !begun,
            Phase::Expired => false,
        }
    }
}

/// A connection of a [`TimedListener`].
struct TimedStream {
    stream: tokio::net::TcpStream,
    timeout: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    phase: Phase,
}

impl TimedStream {
    /// Notes `bytes` written.
    fn wrote(&mut self, bytes: &[u8]) {
        if !bytes.is_empty() && self.phase.rearms(bytes) {
            self.phase = Phase::head();
            let now = tokio::time::Instant::now();
            // `sleep` takes a deadline past the clock's end; `reset` needs one within it.
            let deadline = now.checked_add(self.timeout).unwrap_or(now + FAR);
            self.deadline.as_mut().reset(deadline);
        }
    }
}

/// A deadline that never comes, for a timeout too long for the clock.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl AsyncRead for TimedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if let Phase::Head { begun, .. } = this.phase {
            if this.deadline.as_mut().poll(cx).is_ready() {
                this.phase = Phase::Expired;
                if begun {
                    // No answer is possible at the HTTP level, the head being unread: this one
                    // is written here, on the socket, if it takes it at once.
                    let body = error_line(&format!(
                        "the request head did not arrive within {} s",
                        seconds(this.timeout)
                    ));
                    let answer = format!(
                        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n\
                         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = this.stream.try_write(answer.as_bytes());
                }
            }
        }
        if this.phase == Phase::Expired {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request head did not arrive in time",
            )));
        }
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.stream).poll_read(cx, buf);
        if poll.is_ready() {
            this.phase = this.phase.read(&buf.filled()[before..]);
        }
        poll
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            this.wrote(&buf[..n]);
        }
        poll
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = poll {
            // The first bytes written, enough to tell an interim answer.
            let mut first = Vec::with_capacity(16);
            for slice in bufs {
                let room = (16 - first.len()).min(n - first.len());
                first.extend_from_slice(&slice[..slice.len().min(room)]);
            }
            this.wrote(&first);
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_grades_as_check_json_does() {
        let body = br#"{"model": "70b", "tokens": 15000000000000}"#;
        let json: serde_json::Value = serde_json::from_str(&api_check(body).unwrap()).unwrap();
        assert_eq!(json["pass"], false);
        assert!((json["memory_gb"]["total"].as_f64().unwrap() - 1139.6).abs() < 0.1);
    }

    #[test]
    fn requests_are_checked_as_the_command_line_checks_flags() {
        let cases: [(&[u8], &str); 7] = [
            (br#"{"model": "70b", "tokens": 1e12, "tp": 3}"#, "tp = 3"),
            (
                br#"{"model": "13b", "tokens": 1e12}"#,
                "unknown model '13b'",
            ),
            (br#"{"model": "70b", "tokens": 0}"#, "tokens = 0"),
            (br#"{"model": "70b", "tokens": 1.5}"#, "tokens"),
            (
                br#"{"model": "70b", "tokens": 1e12, "brief": {"mfu": -1}}"#,
                "brief.mfu = -1",
            ),
            (
                br#"{"model": "70b", "tokens": 1e12, "tpp": 1}"#,
                "unknown field `tpp`",
            ),
            (b"\xff", "UTF-8"),
        ];
        for (body, needle) in cases {
            let e = api_check(body).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn an_export_names_the_design_s_fields_and_its_media_type() {
        let e = api_export(br#"{"format": "megatron", "model": "70b", "tokens": 1.5}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tokens:"), "{e}");
        let (text, media) = api_export(
            br#"{"format": "deepspeed", "model": "70b", "tokens": 1e12, "tp": 8, "zero": 3}"#,
        )
        .unwrap();
        assert_eq!(media, "application/json");
        assert!(text.contains("\"stage\": 3"));
        let e = api_export(br#"{"model": "70b", "tokens": 1e12}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("format = missing"), "{e}");
    }

    #[test]
    fn a_family_is_not_searched_silently() {
        let e = api_search(br#"{"brief": {"family": {"layers": "40..60:20", "hidden": "8192", "ffn_ratio": "3.5"}}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("brief.family"), "{e}");
    }

    /// `run_search` answering `body` with `searches`, on a runtime of its own.
    fn answer_search(searches: &Arc<Searches>, body: &'static [u8]) -> (StatusCode, String) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let response = run_search(
                State(Arc::clone(searches)),
                JsonBody(Bytes::from_static(body)),
            )
            .await;
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            (status, String::from_utf8(bytes.to_vec()).unwrap())
        })
    }

    fn searches(limits: Limits) -> Arc<Searches> {
        Arc::new(Searches {
            permits: Arc::new(Semaphore::new(limits.searches)),
            limits,
        })
    }

    #[test]
    fn a_search_past_the_running_limit_is_refused_with_429_and_runs_when_one_ends() {
        let s = searches(Limits::default());
        let held = Arc::clone(&s.permits).try_acquire_many_owned(2).unwrap();
        let (status, body) = answer_search(&s, br#"{"top": 1}"#);
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            body,
            "{\"error\":\"2 searches are running; try again when one has finished\"}\n"
        );
        drop(held);
        assert_eq!(answer_search(&s, br#"{"top": 1}"#).0, StatusCode::OK);
    }

    #[test]
    fn cp_replicas_and_precision_are_graded_with_a_stack_and_refused_without() {
        let design = |more: &str| {
            format!(r#"{{"model": "70b", "tokens": 4000000000000, "tp": 8, "pp": 4{more}}}"#)
        };
        let graded: serde_json::Value = serde_json::from_str(
            &api_check(
                design(r#", "stack": "megatron-te", "cp": 2, "replicate": 2, "zero": 1, "precision": "fp8""#)
                    .as_bytes(),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(graded["layout"]["cp"], 2);
        assert_eq!(graded["layout"]["replicate"], 2);
        assert_eq!(graded["layout"]["dp"], 32);
        assert_eq!(graded["step"]["precision"], "fp8");
        for (more, field) in [
            (r#", "cp": 2"#, "cp"),
            (r#", "replicate": 2, "zero": 1"#, "replicate"),
            (r#", "precision": "fp8""#, "precision"),
        ] {
            let e = api_check(design(more).as_bytes()).unwrap_err().to_string();
            assert!(e.contains(field) && e.contains("stack"), "{e}");
        }
        let found: serde_json::Value = serde_json::from_str(
            &api_search(
                br#"{"models": ["70b"], "top": 3, "stack": "megatron-te", "cp": [1, 2], "precisions": ["bf16", "fp8"]}"#,
            )
            .unwrap(),
        )
        .unwrap();
        let facets = found["search"]["shapes"][0]["facets"].as_array().unwrap();
        assert_eq!(facets.len(), 4, "{facets:?}");
        let e = api_search(br#"{"models": ["70b"], "precisions": ["fp8"]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("precisions") && e.contains("stack"), "{e}");
        let e = api_search(br#"{"models": ["70b"], "stack": "llama3", "precisions": ["fp8"]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("llama3") && e.contains("fp8"), "{e}");
    }

    #[test]
    fn a_design_or_a_search_with_a_stack_is_graded_by_the_detailed_models() {
        let design = |stack: &str| {
            format!(r#"{{"model": "70b", "tokens": 4000000000000, "tp": 8, "pp": 4{stack}}}"#)
        };
        let plate: serde_json::Value =
            serde_json::from_str(&api_check(design("").as_bytes()).unwrap()).unwrap();
        // A plate plan derives no MFU of its own; its runnable grade is the detailed model's.
        assert!(plate.get("mfu").is_none() && plate.get("memory_model").is_none());
        assert_eq!(plate["runnable"]["stack"], "megatron-te");
        let te = api_check(design(r#", "stack": "megatron-te""#).as_bytes()).unwrap();
        assert!(
            te.contains("\"stack\": \"megatron-te\"") && te.contains("\"mfu\""),
            "{te}"
        );
        let e = api_check(design(r#", "stack": "nemo""#).as_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains("stack") && e.contains("megatron-te"), "{e}");
        let found = api_search(br#"{"models": ["70b"], "top": 1, "stack": "torchtitan"}"#).unwrap();
        assert!(found.contains("\"stack\": \"torchtitan\""), "{found}");
    }

    #[test]
    fn a_check_asks_for_its_sensitivity_with_a_boolean() {
        let design = r#""model": "70b", "tokens": 4960000000000, "tp": 8, "zero": 3"#;
        let ask = |extra: &str| api_check(format!("{{{design}{extra}}}").as_bytes());
        let plate: serde_json::Value =
            serde_json::from_str(&ask(r#", "sensitivity": true"#).unwrap()).unwrap();
        assert_eq!(plate["sensitivity"]["rows"][0]["input"], "--mfu");
        assert!(!ask(r#", "sensitivity": false"#)
            .unwrap()
            .contains("sensitivity"));
        assert!(!ask("").unwrap().contains("sensitivity"));
        let detailed: serde_json::Value =
            serde_json::from_str(&ask(r#", "stack": "megatron-te", "sensitivity": true"#).unwrap())
                .unwrap();
        let rows = detailed["sensitivity"]["rows"].as_array().unwrap();
        assert!(rows.iter().any(|r| r["input"] == "--dp-overlap"));
        let e = ask(r#", "sensitivity": 1"#).unwrap_err().to_string();
        assert_eq!(e, "invalid sensitivity = 1: true or false");
    }

    #[test]
    fn a_search_past_its_time_is_answered_with_503() {
        // No time at all: the search (every preset on 720,720 GPUs, whose 240 divisors give
        // tens of milliseconds of layouts) cannot have ended when its answer is first looked
        // for, even on a loaded machine where its thread starts at once.
        let s = searches(Limits {
            timeout: Duration::ZERO,
            ..Limits::default()
        });
        let (status, body) = answer_search(
            &s,
            br#"{"models": ["8b", "70b", "405b"], "brief": {"gpus": 720720}}"#,
        );
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body, "{\"error\":\"the search took longer than 0 s\"}\n");
    }

    #[test]
    fn a_head_ends_at_its_blank_line_however_it_is_read() {
        let head = Phase::head();
        let whole = b"GET / HTTP/1.1\r\nHost: localhost:1\r\n\r\n";
        assert_eq!(head.read(whole), Phase::Message);
        // Split anywhere, the same.
        for at in 0..whole.len() {
            let (a, b) = whole.split_at(at);
            assert_eq!(head.read(a).read(b), Phase::Message, "split at {at}");
            assert_ne!(head.read(a), Phase::Message, "split at {at}");
        }
        // Bare line feeds, as the parser takes them.
        assert_eq!(head.read(b"GET / HTTP/1.1\nHost: a\n\n"), Phase::Message);
        // Line breaks before the request line do not end it, nor does one line.
        assert_eq!(head.read(b"\r\n\r\n\n\n"), head);
        assert_ne!(head.read(b"\r\n\r\nGET / HTTP/1.1\r\n"), Phase::Message);
        // Once the head has come, nothing read matters, nor after the deadline.
        assert_eq!(Phase::Message.read(b"x\r\n\r\n"), Phase::Message);
        assert_eq!(Phase::Expired.read(b"x\r\n\r\n"), Phase::Expired);
    }

    #[test]
    fn an_answer_but_not_an_interim_one_rearms_the_head_deadline() {
        assert!(Phase::Message.rearms(b"HTTP/1.1 200 OK\r\n"));
        assert!(Phase::Message.rearms(b"HTTP/1.1 408 Request Timeout\r\n"));
        assert!(!Phase::Message.rearms(b"HTTP/1.1 100 Continue\r\n\r\n"));
        // A long answer keeps an idle connection's deadline from passing while it is written;
        // once the next head has begun, writes do not extend its time.
        assert!(Phase::head().rearms(b"more of the page"));
        assert!(!Phase::head().read(b"GET /").rearms(b"more of the page"));
        assert!(!Phase::Expired.rearms(b"HTTP/1.1 200 OK\r\n"));
    }

    #[test]
    fn searches_are_bounded() {
        let many = format!(r#"{{"models": {:?}}}"#, vec!["70b"; MAX_MODELS + 1]);
        assert!(api_search(many.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("at most 16"));
        assert!(api_search(br#"{"top": 1000}"#)
            .unwrap_err()
            .to_string()
            .contains("1 to 100"));
        let ok: serde_json::Value =
            serde_json::from_str(&api_search(br#"{"top": 3}"#).unwrap()).unwrap();
        assert_eq!(ok["search"]["plans"].as_array().unwrap().len(), 3);
        assert_eq!(ok["front"]["front"].as_array().unwrap().len(), 158);
    }
}
