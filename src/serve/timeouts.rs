//! How slow requests are bounded: a listener whose connections watch for the end of each
//! request head and fail a read past its deadline, answering a head begun with status 408.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::body::{error_line, seconds};
use super::limits::Peer;

/// A TCP listener whose connections time the arrival of request heads.
///
/// `axum::serve` offers no header timeout (hyper's needs a timer, which it does not set), so
/// the connection does it: it watches the bytes read for the blank line that ends a head,
/// and while a head is awaited, a read past the deadline fails, which ends the connection.
pub(super) struct TimedListener {
    pub(super) listener: tokio::net::TcpListener,
    pub(super) timeout: Duration,
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

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TimedListener>>
    for Peer
{
    /// The peer of a connection, which the search limits count clients by.
    fn connect_info(stream: axum::serve::IncomingStream<'_, TimedListener>) -> Peer {
        Peer(*stream.remote_addr())
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
pub(super) struct TimedStream {
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
}
