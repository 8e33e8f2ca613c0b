//! `trainplan serve` and slow, oversized, oddly addressed or greedy requests, over real sockets
//! on 127.0.0.1 with short limits: a body that never arrives is answered 408 with the one-line
//! JSON error, one declared too large 413 at once; a request head that stalls is answered 408
//! and its connection closed, an idle connection closed; a head that comes slowly but in time
//! is served; host names are matched without regard to case, the port exactly, and a request
//! with two `Host` fields or none is refused; a search past its time, or whose client leaves,
//! is stopped and its place freed at once, and one client runs one search at a time.
//!
//! The table "The workshop's API" of `docs/validation.md` is generated from [`ROWS`] and the
//! rows of the tests that need a search running; with `TRAINPLAN_WRITE_RESULTS` set it is
//! rewritten.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use trainplan::serve::{router_with, serve_on, Limits, MAX_SEARCHES};

/// The timeouts under test.
const SHORT: Duration = Duration::from_millis(200);
/// Longest a test waits for the server to answer or close.
const BOUND: Duration = Duration::from_secs(5);

/// A server on a runtime of its own, stopped when dropped.
struct Server {
    runtime: Option<tokio::runtime::Runtime>,
    address: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn short() -> Limits {
    Limits {
        header_timeout: SHORT,
        body_timeout: SHORT,
        ..Limits::default()
    }
}

/// `serve_on` with `limits` on a free loopback port: the server `trainplan serve` runs.
fn serve(limits: Limits) -> Server {
    let runtime = runtime();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    runtime.spawn(serve_on(listener, limits, std::future::pending()));
    Server {
        runtime: Some(runtime),
        address,
    }
}

/// `router_with` `limits` alone, served by `axum::serve`, for requests to 127.0.0.1.
fn serve_router(limits: Limits) -> Server {
    let runtime = runtime();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    let router = router_with(Some(vec![address.to_string()]), limits);
    runtime.spawn(async move { axum::serve(listener, router).await });
    Server {
        runtime: Some(runtime),
        address,
    }
}

/// Everything the server sends on `stream` until it closes the connection, and how long after
/// `start` it closed; a server that neither closes nor finishes within [`BOUND`] fails the test.
fn until_closed(mut stream: TcpStream, start: Instant) -> (String, Duration) {
    stream.set_read_timeout(Some(BOUND)).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "the server kept the connection open past {BOUND:?} ({e}); it sent {:?}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    (String::from_utf8(got).unwrap(), start.elapsed())
}

/// `pieces` sent on a fresh connection to `address`, `pause` apart; what comes back until the
/// connection closes, and how long after connecting it closed.
fn exchange(address: SocketAddr, pieces: &[&str], pause: Duration) -> (String, Duration) {
    let start = Instant::now();
    let mut stream = TcpStream::connect(address).unwrap();
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(pause);
        }
        stream.write_all(piece.as_bytes()).unwrap();
    }
    until_closed(stream, start)
}

/// The status line of `response` and its body (what follows the head).
fn split(response: &str) -> (&str, &str) {
    let status = response.lines().next().unwrap_or("");
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body)
}

/// A one-line JSON error: `{"error": …}` and a line break, nothing more.
fn assert_error_line(body: &str, want: &str) {
    assert!(
        body.ends_with('\n') && body.matches('\n').count() == 1,
        "{body:?}"
    );
    let value: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(value, serde_json::json!({ "error": want }), "{body:?}");
}

#[test]
fn a_body_that_never_arrives_is_answered_408_with_the_one_line_error() {
    let server = serve_router(short());
    let host = server.address;
    let design = r#"{"model": "70b", "tokens": 1e12}"#;
    let head = |framing: &str| {
        format!(
            "POST /api/check HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             {framing}\r\n\r\n"
        )
    };
    // Part of the body, then nothing; a chunked body whose first chunk never comes.
    let sized = head(&format!("Content-Length: {}", design.len()));
    let chunked = head("Transfer-Encoding: chunked");
    for pieces in [[sized.as_str(), &design[..10]], [chunked.as_str(), ""]] {
        let (response, elapsed) = exchange(server.address, &pieces, Duration::ZERO);
        let (status, body) = split(&response);
        assert_eq!(status, "HTTP/1.1 408 Request Timeout", "{response}");
        assert!(
            response
                .to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{response}"
        );
        assert_error_line(body, "the request body did not arrive within 0.2 s");
        assert!(elapsed >= SHORT, "answered after {elapsed:?}");
    }
    // The whole body, in time, is graded.
    let close = head(&format!(
        "Content-Length: {}\r\nConnection: close",
        design.len()
    ));
    let (response, _) = exchange(server.address, &[&close, design], Duration::ZERO);
    assert_eq!(split(&response).0, "HTTP/1.1 200 OK", "{response}");
}

#[test]
fn a_request_head_that_stalls_is_answered_408_and_closed() {
    let server = serve(short());
    let host = server.address;
    let heads = [
        "GET /api/presets HT".to_string(),
        format!("GET /api/presets HTTP/1.1\r\nHost: {host}\r\nAccept: appl"),
        // Line breaks before a request line are skipped: they do not end a head.
        "\r\n\r\nGET /".to_string(),
    ];
    for head in heads {
        let (response, elapsed) = exchange(server.address, &[&head], Duration::ZERO);
        let (status, body) = split(&response);
        assert_eq!(
            status, "HTTP/1.1 408 Request Timeout",
            "{head:?}: {response}"
        );
        assert!(response.contains("connection: close"), "{response}");
        assert_error_line(body, "the request head did not arrive within 0.2 s");
        assert!(elapsed >= SHORT, "closed after {elapsed:?}");
    }
}

#[test]
fn an_idle_connection_is_closed_without_a_word() {
    let server = serve(short());
    // Nothing sent at all.
    let (response, elapsed) = exchange(server.address, &[], Duration::ZERO);
    assert_eq!(response, "");
    assert!(elapsed >= SHORT, "closed after {elapsed:?}");
    // One request answered, then nothing: the kept-alive connection is closed when idle.
    let request = format!(
        "GET /api/presets HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.address
    );
    let (response, elapsed) = exchange(server.address, &[&request], Duration::ZERO);
    assert_eq!(split(&response).0, "HTTP/1.1 200 OK", "{response}");
    assert_eq!(response.matches("HTTP/1.1 ").count(), 1, "{response}");
    assert!(elapsed >= SHORT, "closed after {elapsed:?}");
}

#[test]
fn a_slow_head_within_the_timeout_is_served() {
    let server = serve(Limits {
        header_timeout: Duration::from_secs(3),
        ..short()
    });
    let host = server.address.to_string();
    let pieces = [
        "GET /api/pre",
        "sets HTTP/1.1\r\nHo",
        &format!("st: {host}\r\nConnection: close\r\n"),
        "\r\n",
    ];
    let (response, _) = exchange(server.address, &pieces, Duration::from_millis(50));
    assert_eq!(split(&response).0, "HTTP/1.1 200 OK", "{response}");
}

#[test]
fn host_names_are_matched_without_regard_to_case_and_ports_exactly() {
    let server = serve(short());
    let port = server.address.port();
    let status = |host: &str| {
        let request =
            format!("GET /api/presets HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let (response, _) = exchange(server.address, &[&request], Duration::ZERO);
        let (status, body) = split(&response);
        (status.to_string(), body.to_string())
    };
    for host in [
        format!("LOCALHOST:{port}"),
        format!("LocalHost:{port}"),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
    ] {
        assert_eq!(status(&host).0, "HTTP/1.1 200 OK", "{host}");
    }
    for host in [
        format!("evil.example:{port}"),
        format!("LOCALHOST.evil.example:{port}"),
        format!("LOCALHOST:{}", port.wrapping_add(1)),
        "LOCALHOST".to_string(),
    ] {
        let (status, body) = status(&host);
        assert_eq!(status, "HTTP/1.1 403 Forbidden", "{host}");
        assert_error_line(
            &body,
            &format!("this server answers requests for 127.0.0.1:{port}, localhost:{port}, [::1]:{port} only"),
        );
    }
}

/// One request the API refuses: what it is, the request (its head's lines, `HOST` standing for
/// the server's address, and its body), and the answer's status line and one-line error.
struct Row {
    case: &'static str,
    head: &'static [&'static str],
    body: &'static str,
    status: &'static str,
    error: &'static str,
}

/// The requests answered at once by `trainplan serve`'s own limits, whatever else runs.
const ROWS: &[Row] = &[
    row(
        "a body declared over 64 KiB: refused before a byte of it is read, not waited for",
        &[
            "POST /api/check HTTP/1.1",
            "Host: HOST",
            "Content-Type: application/json",
            "Content-Length: 1000000000000",
        ],
        "",
        "HTTP/1.1 413 Payload Too Large",
        "invalid request body = 1,000,000,000,000 bytes: at most 65,536 bytes (64 KiB)",
    ),
    row(
        "two `Host` fields (which one a proxy obeys is anyone's guess)",
        &[
            "GET /api/presets HTTP/1.1",
            "Host: HOST",
            "Host: evil.example",
        ],
        "",
        "HTTP/1.1 400 Bad Request",
        "invalid Host = 2 headers: HOST, evil.example: one Host header",
    ),
    row(
        "no `Host` field in HTTP/1.1",
        &["GET /api/presets HTTP/1.1"],
        "",
        "HTTP/1.1 400 Bad Request",
        "invalid Host = none: one Host header (HTTP/1.1 asks for it)",
    ),
    row(
        "a design's brief with a shape family",
        &["POST /api/check HTTP/1.1", "Host: HOST", "Content-Type: application/json"],
        r#"{"model": "70b", "tokens": 1e12, "brief": {"family": {"layers": "40..60:20", "hidden": "8192", "ffn_ratio": "3.5"}}}"#,
        "HTTP/1.1 400 Bad Request",
        "invalid brief.family = a shape family: no family: a design is the one model it names (trainplan search takes families)",
    ),
    row(
        "an export's brief with a shape family",
        &["POST /api/export HTTP/1.1", "Host: HOST", "Content-Type: application/json"],
        r#"{"format": "megatron", "model": "70b", "tokens": 1e12, "brief": {"family": {"layers": "40..60:20", "hidden": "8192", "ffn_ratio": "3.5"}}}"#,
        "HTTP/1.1 400 Bad Request",
        "invalid brief.family = a shape family: no family: a design is the one model it names (trainplan search takes families)",
    ),
];

const fn row(
    case: &'static str,
    head: &'static [&'static str],
    body: &'static str,
    status: &'static str,
    error: &'static str,
) -> Row {
    Row {
        case,
        head,
        body,
        status,
        error,
    }
}

/// A search that runs for minutes on two cores (seconds a shape on one, 16 shapes): 16 models
/// on 98,017,920 GPUs, every CP degree and replica count to 64, two precisions, in which no
/// layout passes, so every one is timed twice.
const HEAVY: &str = r#"{"models": ["L80-h8192-f28672", "L80-h8192-f28160", "L80-h8192-f27648", "L80-h8192-f27136", "L80-h8192-f26624", "L80-h8192-f26112", "L80-h8192-f25600", "L80-h8192-f25088", "L80-h8192-f24576", "L80-h8192-f24064", "L80-h8192-f23552", "L80-h8192-f23040", "L80-h8192-f22528", "L80-h8192-f22016", "L80-h8192-f21504", "L80-h8192-f20992"], "top": 1, "stack": "megatron-te", "cp": [1, 2, 4, 8, 16, 32, 64], "replicate": [1, 2, 4, 8, 16, 32, 64], "precisions": ["bf16", "fp8"], "brief": {"gpus": 98017920, "gpus_per_node": 64, "batch_tolerance": 0.99, "batch_target_tokens": 1000000000000, "max_days": 3000, "loss_target": 100}}"#;
/// A search of a few milliseconds.
const LIGHT: &str = r#"{"models": ["70b"], "top": 1}"#;

/// A search while the same client (127.0.0.1) runs [`HEAVY`].
const SECOND_SEARCH: Row = row(
    "a second search from a client (an IPv4 address, an IPv6 /64) whose first is running: one client cannot take every place",
    &["POST /api/search HTTP/1.1", "Host: HOST", "Content-Type: application/json"],
    LIGHT,
    "HTTP/1.1 429 Too Many Requests",
    "127.0.0.1 already runs 1 search, as many as one client may at once; try again when it has finished",
);

/// [`HEAVY`] under a search time of [`SHORT`] (`trainplan serve`'s is 10 s).
const PAST_ITS_TIME: Row = row(
    "a search past its time (here 0.2 s; 10 s in `trainplan serve`): stopped, and answered once its place is free for the next",
    &["POST /api/search HTTP/1.1", "Host: HOST", "Content-Type: application/json"],
    "(a search of minutes)",
    "HTTP/1.1 503 Service Unavailable",
    "the search took longer than 0.2 s",
);

/// [`HEAVY`], its connection closed while it runs: nothing to answer.
const CLIENT_LEAVES: Row = row(
    "a search whose client leaves (closes the connection) while it runs",
    &[
        "POST /api/search HTTP/1.1",
        "Host: HOST",
        "Content-Type: application/json",
    ],
    "(a search of minutes), then the connection closed",
    "",
    "",
);

/// `row`'s request with `body` to the server at `address`, the connection closed after it.
fn request(row: &Row, body: &str, address: SocketAddr) -> String {
    let host = address.to_string();
    let mut head: Vec<String> = row.head.iter().map(|l| l.replace("HOST", &host)).collect();
    if !body.is_empty() {
        head.push(format!("Content-Length: {}", body.len()));
    }
    head.push("Connection: close".into());
    format!("{}\r\n\r\n{body}", head.join("\r\n"))
}

/// The answer to `row`'s request with `body` from a fresh connection from `from`.
fn send_from(from: IpAddr, address: SocketAddr, row: &Row, body: &str) -> (String, String) {
    let start = Instant::now();
    let mut stream = connect_from(from, address);
    stream
        .write_all(request(row, body, address).as_bytes())
        .unwrap();
    let (response, _) = until_closed(stream, start);
    let (status, body) = split(&response);
    (status.to_string(), body.to_string())
}

/// A connection to `address` from the loopback address `from` (any of 127.0.0.0/8 on Linux).
fn connect_from(from: IpAddr, address: SocketAddr) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(from, 0)).unwrap();
        socket.connect(address).await.unwrap()
    });
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

const ME: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1));
const SOMEONE_ELSE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

/// [`HEAVY`] sent from [`ME`] and running: its connection, held open. A search sent just after
/// it from the same address is refused with 429 once it runs (and may be served before it has
/// begun, then taking its place: it is sent again).
fn hold_a_search(address: SocketAddr) -> TcpStream {
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < BOUND, "the heavy search never ran");
        let mut heavy = connect_from(ME, address);
        heavy
            .write_all(request(&SECOND_SEARCH, HEAVY, address).as_bytes())
            .unwrap();
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let (status, _) = send_from(ME, address, &SECOND_SEARCH, LIGHT);
            if status.starts_with("HTTP/1.1 429") {
                return heavy;
            }
            // Served: the heavy search had not begun, or was refused meanwhile (answered).
            heavy.set_nonblocking(true).unwrap();
            let answered = heavy.peek(&mut [0u8; 1]).is_ok();
            heavy.set_nonblocking(false).unwrap();
            if answered || start.elapsed() > BOUND {
                break;
            }
        }
    }
}

#[test]
fn every_row_of_the_api_table_is_answered_as_it_says_at_once() {
    // `trainplan serve`'s limits: a body waited for would be answered after 30 s, a head after
    // 10 s, both past the bound within which every answer must come.
    let server = serve(Limits::default());
    let host = server.address.to_string();
    for row in ROWS {
        let (response, _) = exchange(
            server.address,
            &[&request(row, row.body, server.address)],
            Duration::ZERO,
        );
        let (status, body) = split(&response);
        assert_eq!(status, row.status, "{}: {response}", row.case);
        assert_error_line(body, &row.error.replace("HOST", &host));
    }
}

#[test]
fn a_body_over_the_limit_without_a_length_is_refused_by_its_size() {
    let server = serve(short());
    let host = server.address;
    let chunk = format!("{:x}\r\n{}\r\n", 70 * 1024, " ".repeat(70 * 1024));
    let head = format!(
        "POST /api/check HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    );
    let (response, _) = exchange(
        server.address,
        &[&head, &chunk, "0\r\n\r\n"],
        Duration::ZERO,
    );
    let (status, body) = split(&response);
    assert_eq!(status, "HTTP/1.1 413 Payload Too Large", "{response}");
    assert_error_line(
        body,
        "invalid request body = over 65,536 bytes: at most 65,536 bytes (64 KiB)",
    );
}

#[test]
fn one_client_cannot_take_every_place() {
    let server = serve(Limits::default());
    assert_eq!(MAX_SEARCHES, 2);
    let held = hold_a_search(server.address);
    let (status, body) = send_from(ME, server.address, &SECOND_SEARCH, LIGHT);
    assert_eq!(status, SECOND_SEARCH.status);
    assert_error_line(&body, SECOND_SEARCH.error);
    // Another client finds the other place.
    let (status, body) = send_from(SOMEONE_ELSE, server.address, &SECOND_SEARCH, LIGHT);
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    drop(held);
}

#[test]
fn a_search_past_its_time_is_stopped_and_its_place_free_when_it_is_answered() {
    let server = serve(Limits {
        searches: 1,
        timeout: SHORT,
        ..Limits::default()
    });
    let (status, body) = send_from(ME, server.address, &PAST_ITS_TIME, HEAVY);
    assert_eq!(status, PAST_ITS_TIME.status, "{body}");
    assert_error_line(&body, PAST_ITS_TIME.error);
    // The one place is free already, for this client or another.
    for client in [ME, SOMEONE_ELSE] {
        let (status, body) = send_from(client, server.address, &SECOND_SEARCH, LIGHT);
        assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    }
}

#[test]
fn a_search_whose_client_leaves_is_stopped_and_its_place_freed() {
    // One place, and time enough for the search to run for minutes.
    let server = serve(Limits {
        searches: 1,
        timeout: Duration::from_secs(600),
        ..Limits::default()
    });
    let held = hold_a_search(server.address);
    assert_eq!(CLIENT_LEAVES.status, "", "no answer: the client has gone");
    drop(held);
    // The place comes free within the bound (the search would hold it for minutes).
    let start = Instant::now();
    loop {
        let (status, body) = send_from(SOMEONE_ELSE, server.address, &SECOND_SEARCH, LIGHT);
        if status == "HTTP/1.1 200 OK" {
            break;
        }
        assert!(
            start.elapsed() < BOUND,
            "the search still holds its place {:?} after its client left: {status} {body}",
            start.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_docs_hold_the_api_table() {
    let code = |s: &str| format!("`{}`", s.replace('|', "\\|"));
    let mut table =
        String::from("| request | for example | answer | the error |\n|---|---|---|---|\n");
    for row in ROWS
        .iter()
        .chain([&SECOND_SEARCH, &PAST_ITS_TIME, &CLIENT_LEAVES])
    {
        let head = row
            .head
            .iter()
            .map(|l| code(&l.replace("HOST", "127.0.0.1:8080")))
            .collect::<Vec<_>>()
            .join("<br>");
        let body = if row.body.is_empty() {
            String::new()
        } else if row.body.starts_with('{') {
            format!("<br>{}", code(row.body))
        } else {
            format!("<br>{}", row.body)
        };
        let (status, error) = match row.status {
            "" => (
                "none".to_string(),
                "none: the search is stopped, its place free for the next at once".to_string(),
            ),
            status => (
                status.trim_start_matches("HTTP/1.1 ").to_string(),
                code(&row.error.replace("HOST", "127.0.0.1:8080")),
            ),
        };
        table.push_str(&format!(
            "| {} | {head}{body} | {status} | {error} |\n",
            row.case
        ));
    }
    common::generated_sections(
        "docs/validation.md",
        "tests/serve_limits.rs",
        &[("api", table)],
    );
}
