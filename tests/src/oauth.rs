//! A token endpoint for the OAUTHBEARER tests: answers every client-credentials POST with a
//! fresh token in Kafka's unsecured JWS form (which the test bed's unsecured validator accepts)
//! naming `sub`, or with the token `bad` gives; records each request.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A running endpoint (it serves until the test process ends).
pub struct TokenEndpoint {
    /// `http://127.0.0.1:PORT/token`.
    pub url: String,
    /// Every request as received (headers and body).
    pub requests: Arc<Mutex<Vec<String>>>,
}

/// Starts an endpoint whose tokens name `sub`, or always answer `bad` instead.
pub fn token_endpoint(sub: &'static str, bad: Option<&'static str>) -> TokenEndpoint {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the token endpoint");
    let url = format!("http://{}/token", listener.local_addr().expect("address"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let mut buf = [0u8; 8192];
            let n = s.read(&mut buf).unwrap_or(0);
            seen.lock()
                .expect("not poisoned")
                .push(String::from_utf8_lossy(&buf[..n]).to_string());
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_secs();
            let token = bad.map(str::to_string).unwrap_or_else(|| {
                format!(
                    "{}.{}.",
                    b64.encode(br#"{"alg":"none"}"#),
                    b64.encode(format!(
                        r#"{{"sub":"{sub}","iat":{now},"exp":{}}}"#,
                        now + 3600
                    ))
                )
            });
            let body = format!(r#"{{"access_token":"{token}","token_type":"bearer"}}"#);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    TokenEndpoint { url, requests }
}
