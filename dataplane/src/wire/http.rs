//! The small, bounded HTTP/1.1 strait speaks to OAuth token endpoints, sans IO: endpoint URLs,
//! one POST request, and the response parsed from the bytes read (`Content-Length`, chunked, or
//! until the server closes). [`crate::io::token`] moves the bytes.
//!
//! A token endpoint answers with a few kilobytes; [`MAX_RESPONSE_BYTES`] bounds what is kept.

use std::path::PathBuf;

/// The largest response accepted from a token endpoint, headers included.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// The most header lines a response may have.
const MAX_HEADERS: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    #[error("`{0}` is not an http://, https:// or file: URL")]
    Scheme(String),
    #[error("the URL `{0}` has no host")]
    NoHost(String),
    #[error("the URL `{0}` has an invalid port")]
    Port(String),
    /// The URL is not repeated: its credentials would be.
    #[error(
        "the token endpoint URL holds user credentials (user:password@); give them as clientId/clientSecret instead"
    )]
    UserInfo,
    #[error("the response is larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    #[error("malformed HTTP response: {0}")]
    Malformed(&'static str),
    #[error("the connection closed before the response was complete")]
    Truncated,
}

/// Where `sasl.oauthbearer.token.endpoint.url` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Http(HttpUrl),
    /// `file:` URL: a file holding a token (Kafka's `FileTokenRetriever`).
    File(PathBuf),
}

/// An `http` or `https` URL, split for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub tls: bool,
    /// Host name or IP address, without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// Path and query, at least `/`.
    pub target: String,
    /// The `Host` header: host and, when not the scheme's default, port.
    pub authority: String,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Self, HttpError> {
        let trimmed = url.trim();
        let (scheme, rest) = trimmed
            .split_once(':')
            .ok_or_else(|| HttpError::Scheme(trimmed.to_string()))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme == "file" {
            // file:/path, file:///path, file://localhost/path
            let path = rest
                .strip_prefix("//localhost")
                .or_else(|| rest.strip_prefix("//"))
                .unwrap_or(rest);
            return Ok(Endpoint::File(PathBuf::from(path)));
        }
        let tls = match scheme.as_str() {
            "http" => false,
            "https" => true,
            _ => return Err(HttpError::Scheme(trimmed.to_string())),
        };
        let rest = rest
            .strip_prefix("//")
            .ok_or_else(|| HttpError::Scheme(trimmed.to_string()))?;
        let (authority, target) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let target = if target.starts_with('?') {
            format!("/{target}")
        } else {
            target.split('#').next().unwrap_or("/").to_string()
        };
        if authority.contains('@') {
            return Err(HttpError::UserInfo);
        }
        let default_port = if tls { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| HttpError::NoHost(trimmed.to_string()))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p
                    .parse()
                    .map_err(|_| HttpError::Port(trimmed.to_string()))?,
                None if after.is_empty() => default_port,
                None => return Err(HttpError::Port(trimmed.to_string())),
            };
            (h.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse()
                        .map_err(|_| HttpError::Port(trimmed.to_string()))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(HttpError::NoHost(trimmed.to_string()));
        }
        Ok(Endpoint::Http(HttpUrl {
            tls,
            host,
            port,
            target,
            authority: authority.to_string(),
        }))
    }
}

/// A POST request with a form body. `headers` come after `Host`; the body's type and length,
/// and `Connection: close` (one request per connection), are added.
pub fn post_form(url: &HttpUrl, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut req = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\n",
        url.target, url.authority
    );
    for (name, value) in headers {
        req.push_str(name);
        req.push_str(": ");
        req.push_str(value);
        req.push_str("\r\n");
    }
    req.push_str(&format!(
        "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\nUser-Agent: strait/{}\r\n\r\n",
        body.len(),
        env!("CARGO_PKG_VERSION")
    ));
    req.push_str(body);
    req.into_bytes()
}

/// A parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Parses the bytes read so far. `Ok(None)`: more bytes are needed (or, at `eof`, the server
/// closed early: [`HttpError::Truncated`]). A response without `Content-Length` or chunked
/// encoding ends when the server closes the connection.
pub fn parse_response(buf: &[u8], eof: bool) -> Result<Option<HttpResponse>, HttpError> {
    if buf.len() > MAX_RESPONSE_BYTES {
        return Err(HttpError::TooLarge);
    }
    let Some(head_end) = find(buf, b"\r\n\r\n") else {
        return if eof {
            Err(HttpError::Truncated)
        } else {
            Ok(None)
        };
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| HttpError::Malformed("headers are not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(HttpError::Malformed("not an HTTP/1.x status line"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .filter(|s| (100..=999).contains(s))
        .ok_or(HttpError::Malformed("bad status code"))?;
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    for (i, line) in lines.enumerate() {
        if i >= MAX_HEADERS {
            return Err(HttpError::Malformed("too many headers"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or(HttpError::Malformed("header line without `:`"))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .parse()
                .map_err(|_| HttpError::Malformed("bad Content-Length"))?;
            if n > MAX_RESPONSE_BYTES {
                return Err(HttpError::TooLarge);
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        }
    }
    let body = &buf[head_end + 4..];
    // 1xx, 204 and 304 carry no body.
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok(Some(HttpResponse {
            status,
            body: Vec::new(),
        }));
    }
    if chunked {
        return match dechunk(body)? {
            Some(b) => Ok(Some(HttpResponse { status, body: b })),
            None if eof => Err(HttpError::Truncated),
            None => Ok(None),
        };
    }
    match content_length {
        Some(n) if body.len() >= n => Ok(Some(HttpResponse {
            status,
            body: body[..n].to_vec(),
        })),
        Some(_) if eof => Err(HttpError::Truncated),
        Some(_) => Ok(None),
        None if eof => Ok(Some(HttpResponse {
            status,
            body: body.to_vec(),
        })),
        None => Ok(None),
    }
}

/// Decodes a chunked body; `None` while incomplete. Trailers are skipped.
fn dechunk(mut data: &[u8]) -> Result<Option<Vec<u8>>, HttpError> {
    let mut out = Vec::new();
    loop {
        let Some(line_end) = find(data, b"\r\n") else {
            return Ok(None);
        };
        let size_text = std::str::from_utf8(&data[..line_end])
            .map_err(|_| HttpError::Malformed("chunk size is not text"))?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| HttpError::Malformed("bad chunk size"))?;
        if size > MAX_RESPONSE_BYTES {
            return Err(HttpError::TooLarge);
        }
        data = &data[line_end + 2..];
        if size == 0 {
            // Trailers end with an empty line.
            return Ok(
                if data.starts_with(b"\r\n") || find(data, b"\r\n\r\n").is_some() {
                    Some(out)
                } else {
                    None
                },
            );
        }
        if data.len() < size + 2 {
            return Ok(None);
        }
        if &data[size..size + 2] != b"\r\n" {
            return Err(HttpError::Malformed("chunk not followed by CRLF"));
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn urls() {
        let Endpoint::Http(u) = Endpoint::parse("https://idp.example.com/oauth2/token").unwrap()
        else {
            panic!()
        };
        assert!(u.tls);
        assert_eq!((u.host.as_str(), u.port), ("idp.example.com", 443));
        assert_eq!(u.target, "/oauth2/token");
        assert_eq!(u.authority, "idp.example.com");
        let Endpoint::Http(u) = Endpoint::parse("HTTP://127.0.0.1:8080?x=1").unwrap() else {
            panic!()
        };
        assert_eq!((u.tls, u.port, u.target.as_str()), (false, 8080, "/?x=1"));
        let Endpoint::Http(u) = Endpoint::parse("http://[::1]:9/t#frag").unwrap() else {
            panic!()
        };
        assert_eq!(
            (u.host.as_str(), u.port, u.target.as_str()),
            ("::1", 9, "/t")
        );
        assert_eq!(
            Endpoint::parse("file:///etc/token.jwt").unwrap(),
            Endpoint::File("/etc/token.jwt".into())
        );
        assert_eq!(
            Endpoint::parse("file:/etc/token.jwt").unwrap(),
            Endpoint::File("/etc/token.jwt".into())
        );
        assert!(matches!(
            Endpoint::parse("ftp://x/"),
            Err(HttpError::Scheme(_))
        ));
        assert!(matches!(
            Endpoint::parse("http://:80/"),
            Err(HttpError::NoHost(_))
        ));
        assert!(matches!(
            Endpoint::parse("http://h:port/"),
            Err(HttpError::Port(_))
        ));
        assert!(matches!(
            Endpoint::parse("https://id:secret@h/"),
            Err(HttpError::UserInfo)
        ));
    }

    #[test]
    fn request_shape() {
        let Endpoint::Http(u) = Endpoint::parse("http://h:81/t").unwrap() else {
            panic!()
        };
        let req =
            String::from_utf8(post_form(&u, &[("Accept", "application/json")], "a=b")).unwrap();
        assert!(req.starts_with("POST /t HTTP/1.1\r\nHost: h:81\r\nAccept: application/json\r\n"));
        assert!(req.contains("Content-Length: 3\r\n") && req.ends_with("\r\n\r\na=b"));
    }

    #[test]
    fn responses() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(
            parse_response(r, false).unwrap(),
            Some(HttpResponse {
                status: 200,
                body: b"hello".to_vec()
            })
        );
        assert_eq!(parse_response(&r[..r.len() - 1], false).unwrap(), None);
        assert_eq!(
            parse_response(&r[..r.len() - 1], true),
            Err(HttpError::Truncated)
        );
        let chunked = b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(
            parse_response(chunked, false).unwrap(),
            Some(HttpResponse {
                status: 401,
                body: b"abcde".to_vec()
            })
        );
        let close = b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\n{}";
        assert_eq!(parse_response(close, false).unwrap(), None);
        assert_eq!(parse_response(close, true).unwrap().unwrap().body, b"{}");
        assert!(parse_response(b"SSH-2.0\r\n\r\n", true).is_err());
        let huge = b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n";
        assert_eq!(parse_response(huge, false), Err(HttpError::TooLarge));
    }

    proptest! {
        #[test]
        fn chunked_round_trip(
            body in proptest::collection::vec(any::<u8>(), 0..2000),
            sizes in proptest::collection::vec(1usize..300, 1..20),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            let mut rest = &body[..];
            let mut i = 0;
            while !rest.is_empty() {
                let n = sizes[i % sizes.len()].min(rest.len());
                wire.extend(format!("{n:x}\r\n").as_bytes());
                wire.extend(&rest[..n]);
                wire.extend(b"\r\n");
                rest = &rest[n..];
                i += 1;
            }
            wire.extend(b"0\r\n\r\n");
            let parsed = parse_response(&wire, false).unwrap().unwrap();
            prop_assert_eq!(parsed.body, body);
            // Any prefix is incomplete, never wrong.
            let at = cut.index(wire.len());
            let prefix = parse_response(&wire[..at], false);
            prop_assert!(matches!(prefix, Ok(None)), "{:?}", prefix);
        }

        #[test]
        fn hostile_responses_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400), eof in any::<bool>()) {
            let _ = parse_response(&data, eof);
            let mut with_head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            with_head.extend(&data);
            let _ = parse_response(&with_head, eof);
        }

        #[test]
        fn urls_never_panic(s in "\\PC{0,60}") {
            let _ = Endpoint::parse(&s);
        }
    }
}
