//! A minimal blocking HTTP/1.1 client for loopback services the tests drive (Toxiproxy's API,
//! strait's REST API): one request per connection, bounded in time and size.

use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Longest a request may take to connect, and then between reads and writes.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read.
const MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;

/// Why a request got no answer.
#[derive(Debug)]
pub enum HttpError {
    /// Connecting, writing or reading failed.
    Io {
        addr: String,
        what: &'static str,
        source: std::io::Error,
    },
    /// The answer is not HTTP.
    BadResponse { addr: String, detail: String },
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Io { addr, what, source } => write!(f, "http {addr}: {what}: {source}"),
            HttpError::BadResponse { addr, detail } => {
                write!(f, "http {addr}: not an HTTP answer: {detail}")
            }
        }
    }
}

impl std::error::Error for HttpError {}

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

/// Sends `method path` with an optional JSON `body` to `addr` (`host:port`).
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<Response, HttpError> {
    let io = |what: &'static str| {
        let addr = addr.to_string();
        move |source| HttpError::Io { addr, what, source }
    };
    let sock = addr
        .to_socket_addrs()
        .map_err(io("resolve"))?
        .next()
        .ok_or_else(|| HttpError::BadResponse {
            addr: addr.to_string(),
            detail: "the address resolves to nothing".into(),
        })?;
    let mut stream = TcpStream::connect_timeout(&sock, HTTP_TIMEOUT).map_err(io("connect"))?;
    stream
        .set_read_timeout(Some(HTTP_TIMEOUT))
        .map_err(io("set timeout"))?;
    stream
        .set_write_timeout(Some(HTTP_TIMEOUT))
        .map_err(io("set timeout"))?;
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).map_err(io("write"))?;
    stream.write_all(body.as_bytes()).map_err(io("write"))?;
    let mut raw = Vec::new();
    stream
        .take(MAX_RESPONSE_BYTES)
        .read_to_end(&mut raw)
        .map_err(io("read"))?;
    parse(addr, &raw)
}

fn parse(addr: &str, raw: &[u8]) -> Result<Response, HttpError> {
    let bad = |detail: String| HttpError::BadResponse {
        addr: addr.to_string(),
        detail,
    };
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| bad(format!("no end of headers in {} bytes", raw.len())))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad(format!("status line {:?}", head.lines().next())))?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body).ok_or_else(|| bad("a broken chunked body".into()))?
    } else {
        body.to_string()
    };
    Ok(Response { status, body })
}

/// The payload of a chunked body (sizes in hex, each chunk followed by CRLF).
fn dechunk(mut body: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_answers() {
        let r = parse("a", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
        let r = parse(
            "a",
            b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_str()), (503, "abcde"));
        assert!(parse("a", b"garbage").is_err());
        assert!(
            parse(
                "a",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
            )
            .is_err()
        );
    }
}
