//! JSON in and out: a request body read as JSON within its limits, and answers and errors
//! written as JSON.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::{Error, Result};
use crate::format::thousands;
use crate::input::parse_json;

use super::limits::{Searches, MAX_BODY};

/// A request body as `T`: UTF-8 JSON, errors naming the field's path.
pub(super) fn parse<T: serde::de::DeserializeOwned>(body: &[u8], kind: &str) -> Result<T> {
    let text = std::str::from_utf8(body)
        .map_err(|_| Error::invalid("body", "bytes that are not UTF-8", "UTF-8 JSON"))?;
    parse_json(text, std::path::Path::new("request"), kind)
}

/// A JSON answer, or the error as `{"error": …}` with status 400.
pub(super) fn answer(result: Result<String>) -> Response {
    match result {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => failure(StatusCode::BAD_REQUEST, &e.to_string()),
    }
}

/// An error as one line of JSON, `{"error": …}`, with `status`.
pub(super) fn failure(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        error_line(message),
    )
        .into_response()
}

/// The body of an error answer: `{"error": …}` and a line break.
pub(super) fn error_line(message: &str) -> String {
    format!("{}\n", json!({ "error": message }))
}

/// A duration in seconds, as errors give it.
pub(super) fn seconds(duration: Duration) -> String {
    crate::format::general(duration.as_secs_f64())
}

/// A request body, read only if it is JSON, within [`MAX_BODY`] and arrived within the limits'
/// body time; else the error to answer (415, 413, 408 or 400). A body whose `Content-Length`
/// is over [`MAX_BODY`] is answered 413 at once, unread, and its connection closed.
pub(super) struct JsonBody(pub(super) Bytes);

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
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(length) = declared.filter(|&n| n > MAX_BODY as u64) {
            // Said at once rather than after reading (or waiting for) what will be refused;
            // the unread body may still come, so the connection carries no other request.
            return Err(closing(too_large(&format!("{} bytes", thousands(length)))));
        }
        let limit = state.limits.body_timeout;
        match tokio::time::timeout(limit, Bytes::from_request(request, state)).await {
            Ok(Ok(bytes)) => Ok(JsonBody(bytes)),
            // A body sent without its length (chunked) that grows past the limit.
            Ok(Err(rejection)) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(closing(too_large(&format!(
                    "over {} bytes",
                    thousands(MAX_BODY as u64)
                ))))
            }
            Ok(Err(rejection)) => Err(failure(rejection.status(), &rejection.body_text())),
            // The rest of the body may still come: the connection cannot carry another
            // request.
            Err(_) => Err(closing(failure(
                StatusCode::REQUEST_TIMEOUT,
                &format!(
                    "the request body did not arrive within {} s",
                    seconds(limit)
                ),
            ))),
        }
    }
}

/// The 413 answer to a body of `size` (as the error names it).
fn too_large(size: &str) -> Response {
    failure(
        StatusCode::PAYLOAD_TOO_LARGE,
        &Error::invalid(
            "request body",
            size,
            format!(
                "at most {} bytes ({} KiB)",
                thousands(MAX_BODY as u64),
                MAX_BODY / 1024
            ),
        )
        .to_string(),
    )
}

/// `response`, closing its connection after it.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
