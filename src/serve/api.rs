//! The JSON API: what each route takes, grades and answers (`/api/check`, `/api/export`,
//! `/api/search`, `/api/presets`), the search bounded in size and in time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

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
use crate::model::layout::{Degrees, Layout, ZeroStage};
use crate::model::{self, Shape};
use crate::plan::check::{check, CheckReport};
use crate::plan::Design;
use crate::report::export::{Exporter, Format, Json, Launch};
use crate::search::progress::{stopping, Progress, Silent};
use crate::search::rank::{Distinct, Rank};
use crate::search::{
    search_listing, searchable_precision, MemorySpace, ParallelSpace, SearchOptions,
};

use super::body::{answer, failure, parse, seconds, JsonBody};
use super::limits::{Client, Peer, Searches, MAX_MODELS, MAX_TOP};

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

/// Refuses a brief's shape family, which a request that names its models would otherwise
/// pass over: `what` is what it grades instead.
fn no_family(patch: &BriefPatch, what: &str) -> Result<()> {
    match patch.family {
        Some(_) => Err(Error::invalid(
            "brief.family",
            "a shape family",
            format!("no family: {what} (trainplan search takes families)"),
        )),
        None => Ok(()),
    }
}

/// The graded design of a request, with its sensitivity when `sensitivity` asks.
fn grade(request: DesignRequest, sensitivity: bool) -> Result<CheckReport> {
    no_family(&request.brief, "a design is the one model it names")?;
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
                    ..Step::default_for(
                        &layout,
                        brief.seq_len,
                        &brief.batch_target_for(&shape),
                        stack,
                    )?
                },
                options: Options::for_stack(stack).on_gpu(brief.mxfp8),
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
    Ok(search_watched(body, &Silent)?.unwrap_or_default())
}

/// [`api_search`], its search told `progress` (and stopped when it is [`stopping`]): `None`
/// for a search stopped early, whose answer would be incomplete.
fn search_watched(body: &[u8], progress: &dyn Progress) -> Result<Option<String>> {
    let request: SearchRequest = parse(body, "a search request")?;
    no_family(&request.brief, "the workshop searches named models")?;
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
    let (report, _) = search_listing(&brief, &shapes, &options, progress);
    if stopping(progress) {
        return Ok(None);
    }
    Ok(Some(format!(
        "{{\"search\": {}, \"front\": {}}}\n",
        Json.search(&report)?.trim_end(),
        Json.front(&report)?.trim_end()
    )))
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

/// A search's stop: set when its request is answered without it (past its time) or dropped (its
/// client left, or the server stops), read by the search between layouts and blocks of shapes.
#[derive(Debug, Clone, Default)]
struct Cancel(Arc<AtomicBool>);

impl Cancel {
    fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Progress for Cancel {
    fn cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Sets its [`Cancel`] when dropped: with the request's future, when hyper drops it because the
/// client closed the connection, or when the handler ends.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

impl FromRequestParts<Arc<Searches>> for Client {
    type Rejection = std::convert::Infallible;

    /// The client of a request, by the peer address of its connection: `serve_on`'s, or the
    /// `SocketAddr` of a router served with `into_make_service_with_connect_info`.
    async fn from_request_parts(
        parts: &mut Parts,
        _: &Arc<Searches>,
    ) -> std::result::Result<Client, Self::Rejection> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<Peer>>()
            .map(|ConnectInfo(Peer(address))| *address)
            .or_else(|| {
                parts
                    .extensions
                    .get::<ConnectInfo<SocketAddr>>()
                    .map(|ConnectInfo(address)| *address)
            });
        Ok(Client::of(peer.map(|a| a.ip())))
    }
}

/// A search on a blocking thread, at most so many at once and so many for one client,
/// answered within the limits' time (status 429 past the places, 503 past the time). A search
/// answered 503, or whose client leaves, is stopped: it gives back its place within a layout's
/// weighing, and a 503 is sent once it has.
pub(super) async fn run_search(
    State(searches): State<Arc<Searches>>,
    client: Client,
    JsonBody(body): JsonBody,
) -> Response {
    let limits = searches.limits;
    let slot = match searches.admit(client) {
        Ok(slot) => slot,
        Err(message) => return failure(StatusCode::TOO_MANY_REQUESTS, &message),
    };
    let cancel = Cancel::default();
    let _stop_when_dropped = CancelOnDrop(cancel.clone());
    let watched = cancel.clone();
    let mut work = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        search_watched(&body, &watched)
    });
    match tokio::time::timeout(limits.timeout, &mut work).await {
        Ok(Ok(Ok(Some(found)))) => answer(Ok(found)),
        Ok(Ok(Err(e))) => answer(Err(e)),
        // Stopped, the time not yet past: the whole process was asked to stop (the server is
        // shutting down).
        Ok(Ok(Ok(None))) => failure(
            StatusCode::SERVICE_UNAVAILABLE,
            "the search was stopped: the server is shutting down",
        ),
        Ok(Err(_)) => failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the search stopped unexpectedly",
        ),
        Err(_) => {
            // Stop the search and wait for it to give back its place, so that the next search
            // finds it free once this answer is sent.
            cancel.set();
            let _ = work.await;
            failure(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the search took longer than {} s", seconds(limits.timeout)),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::Bytes;

    use super::*;
    use crate::serve::Limits;

    #[test]
    fn the_api_grades_as_check_json_does() {
        let body = br#"{"model": "70b", "tokens": 15000000000000}"#;
        let json: serde_json::Value = serde_json::from_str(&api_check(body).unwrap()).unwrap();
        assert_eq!(json["pass"], false);
        assert!((json["memory_gb"]["total"].as_f64().unwrap() - 1139.6).abs() < 0.1);
    }

    #[test]
    fn the_api_takes_a_scale_up_domain_and_says_where_the_ranks_sit() {
        let body = br#"{"model": "70b", "tokens": 1e12, "tp": 8, "pp": 4,
            "brief": {"gpus": 512, "gpus_per_node": 4, "scale_up_gpus": 72, "scale_up_used": 64}}"#;
        let json: serde_json::Value = serde_json::from_str(&api_check(body).unwrap()).unwrap();
        assert_eq!(json["placement"]["scale_up_used"], 64);
        assert_eq!(json["placement"]["groups"][0]["link"], "nvlink");
        let bad = br#"{"model": "70b", "tokens": 1e12, "brief": {"gpus_per_node": 4, "scale_up_gpus": 6}}"#;
        let e = api_check(bad).unwrap_err().to_string();
        assert!(e.contains("brief.scale_up_gpus = 6"), "{e}");
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

    #[test]
    fn a_design_with_a_family_is_refused_by_name_not_graded_without_it() {
        let family =
            r#""brief": {"family": {"layers": "40..60:20", "hidden": "8192", "ffn_ratio": "3.5"}}"#;
        let want = "invalid brief.family = a shape family: no family: a design is the one model \
                    it names (trainplan search takes families)";
        let design = format!(r#"{{"model": "70b", "tokens": 1e12, {family}}}"#);
        assert_eq!(api_check(design.as_bytes()).unwrap_err().to_string(), want);
        let export =
            format!(r#"{{"format": "megatron", "model": "70b", "tokens": 1e12, {family}}}"#);
        assert_eq!(api_export(export.as_bytes()).unwrap_err().to_string(), want);
    }

    #[test]
    fn a_cancelled_search_gives_no_answer_rather_than_part_of_one() {
        let cancelled = Cancel::default();
        cancelled.set();
        assert_eq!(search_watched(br#"{"top": 1}"#, &cancelled).unwrap(), None);
        // Its request is read and checked all the same.
        assert!(search_watched(br#"{"top": 0}"#, &cancelled).is_err());
        assert!(search_watched(br#"{"top": 1}"#, &Cancel::default())
            .unwrap()
            .is_some());
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
                Client::Unknown,
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
        Searches::new(limits)
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
    fn a_passing_window_between_grid_counts_lists_its_plans_on_the_page_too() {
        // 70B passes on 1.733 T – 1.736 T tokens, between two counts of the grid: the page's
        // search goes exact there, as the command line's does, rather than show 0 of 0.
        let s = searches(Limits::default());
        let (status, body) = answer_search(
            &s,
            br#"{"models": ["70b"], "top": 3, "brief": {"gpus": 1024, "max_days": 21, "loss_target": 1.97}}"#,
        );
        assert_eq!(status, StatusCode::OK, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["search"]["exact"], true, "{body}");
        assert_eq!(v["search"]["plans"].as_array().unwrap().len(), 3, "{body}");
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
