//! OAUTHBEARER tokens, sans IO: the client initial response (RFC 7628), Kafka's unsecured JWS,
//! the client-credentials token request and response (RFC 6749 §4.4), the JWT claims a login
//! checks, and when a token is refreshed. Time comes in as milliseconds since the epoch; the
//! fetching lives in [`crate::io::token`].
//!
//! Tokens and client secrets are [`Secret`]s; no error here ever holds one.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD as B64URL};

use super::config::{ClaimValue, Secret, TokenRefresh, UnsecuredLogin};

/// Problems with a token or a token endpoint's answer. Never holds the token or a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    #[error("the unsecured login options name no `{0}` claim (unsecuredLoginStringClaim_{0})")]
    NoPrincipal(String),
    #[error("the `{0}` claim is set by the login itself and cannot be given as an option")]
    ReservedClaim(String),
    #[error("SASL extension name `{0}` is invalid (letters only, not `auth`)")]
    ExtensionName(String),
    #[error("the value of SASL extension `{0}` holds characters RFC 7628 does not allow")]
    ExtensionValue(String),
    #[error("the token endpoint's response is not JSON")]
    ResponseNotJson,
    #[error("the token endpoint's response has no access_token (it has: {0})")]
    NoAccessToken(String),
    #[error("the access token is not a JWT: {0}")]
    MalformedJwt(&'static str),
    #[error("the access token has no `{0}` claim")]
    MissingClaim(String),
    #[error("the access token's `{claim}` claim is not {expected}")]
    BadClaim {
        claim: &'static str,
        expected: &'static str,
    },
    #[error("the access token expired {0} ms ago")]
    Expired(i64),
    #[error("the access token holds characters a SASL bearer token cannot carry")]
    TokenCharacters,
}

/// RFC 7628 separator.
const KVSEP: u8 = 0x01;

/// The OAUTHBEARER client initial response, as Kafka's `OAuthBearerClientInitialResponse`
/// writes it: `n,,\x01auth=Bearer <token>[\x01key=value...]\x01\x01`.
pub fn client_initial_response(token: &Secret, extensions: &[(String, String)]) -> Vec<u8> {
    let mut m = Vec::with_capacity(token.expose().len() + 32);
    m.extend_from_slice(b"n,,");
    m.push(KVSEP);
    m.extend_from_slice(b"auth=Bearer ");
    m.extend_from_slice(token.expose().as_bytes());
    for (k, v) in extensions {
        m.push(KVSEP);
        m.extend_from_slice(k.as_bytes());
        m.push(b'=');
        m.extend_from_slice(v.as_bytes());
    }
    m.push(KVSEP);
    m.push(KVSEP);
    m
}

/// Kafka's rules for SASL extensions (`OAuthBearerClientInitialResponse.validateExtensions`):
/// names are letters, `auth` is reserved, values are printable ASCII, space, tab, CR, LF.
pub fn validate_extension(name: &str, value: &str) -> Result<(), OAuthError> {
    if name.is_empty() || name == "auth" || !name.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(OAuthError::ExtensionName(name.to_string()));
    }
    if value.is_empty()
        || !value
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Err(OAuthError::ExtensionValue(name.to_string()));
    }
    Ok(())
}

/// Whether a token can travel in the `auth=Bearer` field (Kafka's `AUTH_PATTERN`: base64url,
/// base64 and `.~`, optional `=` padding).
pub fn check_token_characters(token: &str) -> Result<(), OAuthError> {
    let body = token.trim_end_matches('=');
    if body.is_empty()
        || !body.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~' | b'+' | b'/' | b'.')
        })
    {
        return Err(OAuthError::TokenCharacters);
    }
    Ok(())
}

/// The elements of an `unsecuredLoginListClaim_` option, as Kafka's
/// `OAuthBearerUnsecuredLoginCallbackHandler` splits it: the first character is the
/// delimiter; Java's `String.split` drops trailing empty elements, and Kafka then adds one empty
/// element when the list starts or ends with the delimiter or holds two in a row.
pub fn unsecured_list_claim(value: &str) -> Vec<String> {
    let mut chars = value.chars();
    let Some(delimiter) = chars.next() else {
        return Vec::new();
    };
    let list = chars.as_str();
    if list.is_empty() {
        return Vec::new();
    }
    let mut elements: Vec<String> = list.split(delimiter).map(str::to_string).collect();
    while elements.len() > 1 && elements.last().is_some_and(String::is_empty) {
        elements.pop();
    }
    let doubled: String = [delimiter, delimiter].iter().collect();
    if list.starts_with(delimiter) || list.ends_with(delimiter) || list.contains(&doubled) {
        elements.push(String::new());
    }
    elements
}

/// Seconds since the epoch with millisecond precision, as a JSON number.
fn seconds_json(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let abs = ms.unsigned_abs();
    format!("{sign}{}.{:03}", abs / 1000, abs % 1000)
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// The unsecured JWS of Kafka's `OAuthBearerUnsecuredLoginCallbackHandler`: header
/// `{"alg":"none"}`, claims `exp` and `iat` (seconds, fractional) and the configured string,
/// number and list claims, both base64url without padding, and an empty signature
/// (`header.claims.`). Kafka's own JSON escaping turns `"` into the invalid `\\"`; strait
/// escapes correctly, which is identical for every value without `"` or `\`.
pub fn unsecured_token(login: &UnsecuredLogin, now_ms: i64) -> Result<Secret, OAuthError> {
    if login.principal().trim().is_empty() {
        return Err(OAuthError::NoPrincipal(login.principal_claim_name.clone()));
    }
    let mut claims = format!(
        "{{\"exp\":{},\"iat\":{}",
        seconds_json(now_ms.saturating_add(login.lifetime_seconds.saturating_mul(1000))),
        seconds_json(now_ms)
    );
    for (name, value) in &login.claims {
        if name == "exp" || name == "iat" {
            return Err(OAuthError::ReservedClaim(name.clone()));
        }
        claims.push(',');
        claims.push_str(&json_string(name));
        claims.push(':');
        match value {
            ClaimValue::String(s) => claims.push_str(&json_string(s)),
            ClaimValue::Number(n) => claims.push_str(n),
            ClaimValue::List(items) => {
                let items: Vec<String> = items.iter().map(|i| json_string(i)).collect();
                claims.push('[');
                claims.push_str(&items.join(","));
                claims.push(']');
            }
        }
    }
    claims.push('}');
    let header = B64URL.encode(br#"{"alg":"none"}"#);
    Ok(Secret::new(format!(
        "{header}.{}.",
        B64URL.encode(claims.as_bytes())
    )))
}

/// Java's `URLEncoder.encode(s, UTF_8)` (HTML form encoding): letters, digits and `.-*_` stay,
/// space becomes `+`, every other byte `%XX`.
pub fn form_urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The `Authorization` header value of a client-credentials request, as Kafka's
/// `HttpAccessTokenRetriever` writes it: `Basic base64(id:secret)`, the parts trimmed and,
/// with `sasl.oauthbearer.header.urlencode=true`, URL-encoded first.
pub fn basic_authorization(client_id: &str, client_secret: &Secret, urlencode: bool) -> Secret {
    let (id, secret) = (client_id.trim(), client_secret.expose().trim());
    let pair = if urlencode {
        format!("{}:{}", form_urlencode(id), form_urlencode(secret))
    } else {
        format!("{id}:{secret}")
    };
    Secret::new(format!("Basic {}", B64.encode(pair)))
}

/// The form body of a client-credentials request: `grant_type=client_credentials` and the
/// trimmed, encoded scope when there is one.
pub fn token_request_body(scope: Option<&str>) -> String {
    let mut body = "grant_type=client_credentials".to_string();
    if let Some(scope) = scope.map(str::trim).filter(|s| !s.is_empty()) {
        body.push_str("&scope=");
        body.push_str(&form_urlencode(scope));
    }
    body
}

/// The `access_token` of a token endpoint's JSON response.
pub fn parse_token_response(body: &[u8]) -> Result<Secret, OAuthError> {
    let json: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| OAuthError::ResponseNotJson)?;
    match json.get("access_token").and_then(|v| v.as_str()) {
        Some(t) if !t.trim().is_empty() => Ok(Secret::new(t.trim())),
        _ => {
            // Name the fields only: their values may be secrets (a refresh token, say).
            let fields: Vec<String> = json
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            Err(OAuthError::NoAccessToken(if fields.is_empty() {
                "no fields".into()
            } else {
                fields.join(", ")
            }))
        }
    }
}

/// Longest part of an error response kept for messages (Kafka keeps 1000 characters).
const MAX_ERROR_TEXT_CHARS: usize = 300;

/// A token endpoint's error response for messages, as Kafka's `formatErrorMessage` reads it
/// (RFC 6749 §5.2 `error` and `error_description`, or Okta's `errorCode` and `errorSummary`),
/// bounded. RFC 6749 error responses hold no credentials.
pub fn describe_error_response(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "{}".into();
    }
    let described = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(json) => {
            let pair = |a: &str, b: &str| {
                json.get(a).map(|e| {
                    format!(
                        "{} - {}",
                        e,
                        json.get(b).map_or("none".into(), |d| d.to_string())
                    )
                })
            };
            pair("error", "error_description")
                .or_else(|| pair("errorCode", "errorSummary"))
                .unwrap_or_else(|| text.to_string())
        }
        Err(_) => text.to_string(),
    };
    let mut out: String = described.chars().take(MAX_ERROR_TEXT_CHARS).collect();
    if out.len() < described.len() {
        out.push('…');
    }
    format!("{{{out}}}")
}

/// What a login checks in a token it obtained (Kafka's `LoginAccessTokenValidator`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenClaims {
    /// `exp`, in ms since the epoch.
    pub expires_at_ms: i64,
    /// `iat`, in ms since the epoch, when present.
    pub issued_at_ms: Option<i64>,
    /// The subject claim's value (the principal).
    pub subject: String,
}

/// Reads the claims of a JWT (`header.payload.signature`, base64url JSON); the signature is the
/// broker's to check. `exp` and the subject claim `sub_claim` are required, as in Kafka.
pub fn parse_jwt(token: &Secret, sub_claim: &str) -> Result<TokenClaims, OAuthError> {
    let parts: Vec<&str> = token.expose().split('.').collect();
    if parts.len() != 3 {
        return Err(OAuthError::MalformedJwt(
            "expected three sections separated by `.`",
        ));
    }
    let decode = |part: &str, what: &'static str| {
        B64URL
            .decode(part.trim_end_matches('='))
            .map_err(|_| OAuthError::MalformedJwt(what))
            .and_then(|bytes| {
                serde_json::from_slice::<serde_json::Value>(&bytes)
                    .map_err(|_| OAuthError::MalformedJwt(what))
            })
    };
    decode(parts[0], "the header is not base64url JSON")?;
    let payload = decode(parts[1], "the payload is not base64url JSON")?;
    let seconds = |claim: &'static str| -> Result<Option<i64>, OAuthError> {
        match payload.get(claim) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|s| s.is_finite() && s.abs() < 1e15)
                .map(|s| Some((s * 1000.0) as i64))
                .ok_or(OAuthError::BadClaim {
                    claim,
                    expected: "a number of seconds",
                }),
        }
    };
    let expires_at_ms = seconds("exp")?.ok_or_else(|| OAuthError::MissingClaim("exp".into()))?;
    let issued_at_ms = seconds("iat")?;
    let subject = match payload.get(sub_claim).and_then(|v| v.as_str()) {
        Some(s) if !s.trim().is_empty() => s.trim().to_string(),
        _ => return Err(OAuthError::MissingClaim(sub_claim.to_string())),
    };
    Ok(TokenClaims {
        expires_at_ms,
        issued_at_ms,
        subject,
    })
}

/// When to replace a token valid from `start_ms` (its `iat`, or when it was obtained) to
/// `expires_at_ms`, seen at `now_ms`: Kafka's `ExpiringCredentialRefreshingLogin.refreshMs`.
/// `jitter` is a random number in `[0, 1)` (the caller draws it, so this stays deterministic).
/// Returns `None` when the token has already expired. Never later than the expiry (Kafka's
/// factor plus jitter can exceed 1; a refresh after expiry is too late).
pub fn refresh_at_ms(
    now_ms: i64,
    start_ms: i64,
    expires_at_ms: i64,
    cfg: &TokenRefresh,
    jitter: f64,
) -> Option<i64> {
    if now_ms > expires_at_ms {
        return None;
    }
    let pct = cfg.window_factor + cfg.window_jitter * jitter.clamp(0.0, 1.0);
    let min_period_ms = (cfg.min_period_seconds as i64).saturating_mul(1000);
    let buffer_ms = (cfg.buffer_seconds as i64).saturating_mul(1000);
    if now_ms
        .saturating_add(min_period_ms)
        .saturating_add(buffer_ms)
        > expires_at_ms
    {
        // Too short-lived for both buffers: refresh at the window's share of what is left.
        let at = now_ms + ((expires_at_ms - now_ms) as f64 * pct) as i64;
        return Some(at.min(expires_at_ms));
    }
    let proposed = start_ms + ((expires_at_ms - start_ms) as f64 * pct) as i64;
    let buffer_begins = expires_at_ms - buffer_ms;
    if proposed > buffer_begins {
        return Some(buffer_begins);
    }
    Some(proposed.max(now_ms + min_period_ms).min(expires_at_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn login(claims: Vec<(&str, ClaimValue)>) -> UnsecuredLogin {
        UnsecuredLogin {
            principal_claim_name: "sub".into(),
            lifetime_seconds: 3600,
            claims: claims
                .into_iter()
                .map(|(n, v)| (n.to_string(), v))
                .collect(),
            extensions: Vec::new(),
        }
    }

    #[test]
    fn unsecured_token_has_kafkas_shape() {
        let l = login(vec![
            ("sub", ClaimValue::String("alice".into())),
            ("n", ClaimValue::Number("1.0".into())),
            ("scope", ClaimValue::List(vec!["a".into(), "b".into()])),
        ]);
        let token = unsecured_token(&l, 1_700_000_000_123).unwrap();
        let parts: Vec<&str> = token.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[2], "");
        assert_eq!(B64URL.decode(parts[0]).unwrap(), br#"{"alg":"none"}"#);
        let claims = String::from_utf8(B64URL.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            r#"{"exp":1700003600.123,"iat":1700000000.123,"sub":"alice","n":1.0,"scope":["a","b"]}"#
        );
        check_token_characters(token.expose()).unwrap();
        let parsed = parse_jwt(&token, "sub").unwrap();
        assert_eq!(parsed.subject, "alice");
        assert_eq!(parsed.expires_at_ms, 1_700_003_600_123);
        assert_eq!(parsed.issued_at_ms, Some(1_700_000_000_123));
    }

    #[test]
    fn unsecured_token_needs_its_principal_and_refuses_reserved_claims() {
        assert_eq!(
            unsecured_token(&login(vec![]), 0),
            Err(OAuthError::NoPrincipal("sub".into()))
        );
        let l = login(vec![
            ("sub", ClaimValue::String("a".into())),
            ("exp", ClaimValue::Number("1".into())),
        ]);
        assert_eq!(
            unsecured_token(&l, 0),
            Err(OAuthError::ReservedClaim("exp".into()))
        );
    }

    #[test]
    fn list_claims_split_like_kafka() {
        assert_eq!(unsecured_list_claim(",a,b"), vec!["a", "b"]);
        assert_eq!(unsecured_list_claim("|a|b"), vec!["a", "b"]);
        assert_eq!(unsecured_list_claim(",a,,b"), vec!["a", "", "b", ""]);
        assert_eq!(unsecured_list_claim(",a,"), vec!["a", ""]);
        assert_eq!(unsecured_list_claim(",,a"), vec!["", "a", ""]);
        assert!(unsecured_list_claim(",").is_empty());
        assert!(unsecured_list_claim("").is_empty());
    }

    #[test]
    fn extensions_follow_rfc7628() {
        validate_extension("traceId", "abc 123").unwrap();
        assert!(validate_extension("auth", "x").is_err());
        assert!(validate_extension("trace_id", "x").is_err());
        assert!(validate_extension("t", "\u{1}").is_err());
        assert!(validate_extension("t", "").is_err());
    }

    #[test]
    fn client_credentials_request_like_kafka() {
        let auth = basic_authorization(" my client ", &Secret::new("s3:cr/t "), false);
        assert_eq!(
            auth.expose(),
            format!("Basic {}", B64.encode("my client:s3:cr/t"))
        );
        let auth = basic_authorization("my client", &Secret::new("s3:cr/t"), true);
        assert_eq!(
            auth.expose(),
            format!("Basic {}", B64.encode("my+client:s3%3Acr%2Ft"))
        );
        assert_eq!(token_request_body(None), "grant_type=client_credentials");
        assert_eq!(
            token_request_body(Some("  ")),
            "grant_type=client_credentials"
        );
        assert_eq!(
            token_request_body(Some(" kafka read:all ")),
            "grant_type=client_credentials&scope=kafka+read%3Aall"
        );
    }

    #[test]
    fn token_responses() {
        let t = parse_token_response(br#"{"access_token":"abc.def.ghi","expires_in":60}"#).unwrap();
        assert_eq!(t.expose(), "abc.def.ghi");
        let err =
            parse_token_response(br#"{"refresh_token":"SECRET-R","token_type":"x"}"#).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("refresh_token") && !text.contains("SECRET-R"),
            "{text}"
        );
        assert_eq!(
            parse_token_response(b"<html>"),
            Err(OAuthError::ResponseNotJson)
        );
        assert_eq!(
            describe_error_response(br#"{"error":"invalid_client","error_description":"bad"}"#),
            r#"{"invalid_client" - "bad"}"#
        );
        assert_eq!(describe_error_response(b""), "{}");
        assert!(describe_error_response(&[b'x'; 5000]).chars().count() < 310);
    }

    #[test]
    fn jwt_claims_are_checked() {
        let jwt = |payload: &str| {
            Secret::new(format!(
                "{}.{}.sig",
                B64URL.encode(br#"{"alg":"RS256"}"#),
                B64URL.encode(payload)
            ))
        };
        let c = parse_jwt(&jwt(r#"{"exp":1700000000,"sub":"svc"}"#), "sub").unwrap();
        assert_eq!(c.expires_at_ms, 1_700_000_000_000);
        assert_eq!(c.issued_at_ms, None);
        assert_eq!(
            parse_jwt(&jwt(r#"{"sub":"svc"}"#), "sub"),
            Err(OAuthError::MissingClaim("exp".into()))
        );
        assert_eq!(
            parse_jwt(&jwt(r#"{"exp":1,"client_id":"svc"}"#), "sub"),
            Err(OAuthError::MissingClaim("sub".into()))
        );
        assert!(parse_jwt(&jwt(r#"{"exp":1,"client_id":"svc"}"#), "client_id").is_ok());
        assert!(parse_jwt(&jwt(r#"{"exp":"soon","sub":"a"}"#), "sub").is_err());
        assert!(parse_jwt(&Secret::new("opaque-token"), "sub").is_err());
    }

    #[test]
    fn refresh_follows_kafkas_rules() {
        let cfg = TokenRefresh::default();
        let hour = 3_600_000;
        // 80 % of an hour-long token, no jitter.
        assert_eq!(refresh_at_ms(0, 0, hour, &cfg, 0.0), Some(hour * 8 / 10));
        // The end buffer (300 s) wins over 85 %: 3060 s > 3300 s? no; 0.95 * 3600 = 3420 > 3300.
        let late = TokenRefresh {
            window_factor: 0.95,
            window_jitter: 0.0,
            ..cfg
        };
        assert_eq!(refresh_at_ms(0, 0, hour, &late, 0.0), Some(hour - 300_000));
        // Too short for both buffers: a share of what is left.
        assert_eq!(refresh_at_ms(0, 0, 100_000, &cfg, 0.0), Some(80_000));
        // The minimum period from now.
        assert_eq!(
            refresh_at_ms(2_800_000, 0, hour, &cfg, 0.0),
            Some(2_880_000)
        );
        assert_eq!(
            refresh_at_ms(1_000_000, 0, 2 * hour, &cfg, 0.0).map(|t| t >= 1_060_000),
            Some(true)
        );
        assert_eq!(refresh_at_ms(hour + 1, 0, hour, &cfg, 0.0), None);
    }

    proptest! {
        #[test]
        fn refresh_is_never_after_expiry(
            now in 0i64..1_000_000_000,
            start_back in 0i64..1_000_000,
            life in 1i64..100_000_000,
            jitter in 0.0f64..1.0,
            factor in 0.5f64..=1.0,
            min_period in 0u64..=900,
            buffer in 0u64..=3600,
        ) {
            let cfg = TokenRefresh {
                window_factor: factor,
                window_jitter: 0.25,
                min_period_seconds: min_period,
                buffer_seconds: buffer,
            };
            let start = now - start_back;
            let exp = now + life;
            let at = refresh_at_ms(now, start, exp, &cfg, jitter).unwrap();
            prop_assert!(at >= now, "{at} < {now}");
            prop_assert!(at <= exp, "{at} > {exp}");
        }

        #[test]
        fn jwt_parser_never_panics(s in "\\PC{0,200}") {
            let _ = parse_jwt(&Secret::new(s), "sub");
        }

        #[test]
        fn form_encoding_is_reversible(s in "\\PC{0,40}") {
            let enc = form_urlencode(&s);
            prop_assert!(enc.bytes().all(|b| b.is_ascii_alphanumeric() || b".-*_+%".contains(&b)));
            let mut out = Vec::new();
            let bytes = enc.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                match bytes[i] {
                    b'+' => { out.push(b' '); i += 1; }
                    b'%' => {
                        let h = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                        out.push(u8::from_str_radix(h, 16).unwrap());
                        i += 3;
                    }
                    b => { out.push(b); i += 1; }
                }
            }
            prop_assert_eq!(String::from_utf8(out).unwrap(), s);
        }
    }
}
