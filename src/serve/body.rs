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
use crate::input::parse_json;

use super::limits::Searches;

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

/// A request body, read only if it is JSON, within [`MAX_BODY`](crate::serve::MAX_BODY) and arrived within the
/// limits' body time; else the error to answer (415, 413, 408 or 400).
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
