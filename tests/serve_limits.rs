//! `trainplan serve` and slow or oddly addressed requests, over real sockets on 127.0.0.1 with
//! short limits: a body that never arrives is answered 408 with the one-line JSON error; a
//! request head that stalls is answered 408 and its connection closed, an idle connection
//! closed; a head that comes slowly but in time is served; host names are matched without
//! regard to case, the port exactly.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use trainplan::serve::{router_with, serve_on, Limits};

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
