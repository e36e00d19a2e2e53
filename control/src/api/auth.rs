//! Who may change things: mutating endpoints need `Authorization: Bearer <strait.api.token>`;
//! without a token configured they are allowed only when the API listens on loopback.

use std::fmt;
use std::net::SocketAddr;

/// The API token (`strait.api.token`). Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiToken(String);

impl ApiToken {
    pub fn new(token: impl Into<String>) -> ApiToken {
        ApiToken(token.into())
    }

    /// Whether `candidate` is the token, in time independent of where they differ.
    fn matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), candidate.as_bytes());
        let mut diff = a.len() ^ b.len();
        for (i, x) in a.iter().enumerate() {
            diff |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
        }
        diff == 0
    }
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

/// The API's access rule.
#[derive(Debug, Clone)]
pub struct Auth {
    pub token: Option<ApiToken>,
    /// The API listens on a loopback address.
    pub loopback: bool,
}

/// Why a mutating request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// 401: no or a wrong bearer token.
    Unauthorized,
    /// 403: no token configured and the API is reachable from other hosts.
    NoTokenOffLoopback,
}

impl Denied {
    pub fn message(self) -> &'static str {
        match self {
            Denied::Unauthorized => {
                "this endpoint needs the header Authorization: Bearer <strait.api.token>"
            }
            Denied::NoTokenOffLoopback => {
                "changes through the API need strait.api.token when strait.api.listen is not a loopback address"
            }
        }
    }
}

impl Auth {
    pub fn new(token: Option<ApiToken>, listen: SocketAddr) -> Auth {
        Auth {
            token,
            loopback: listen.ip().is_loopback(),
        }
    }

    /// Whether a request with this `Authorization` header value may change things.
    pub fn check(&self, authorization: Option<&str>) -> Result<(), Denied> {
        match &self.token {
            Some(token) => {
                let given = authorization
                    .and_then(|h| h.strip_prefix("Bearer "))
                    .map(str::trim);
                match given {
                    Some(g) if token.matches(g) => Ok(()),
                    _ => Err(Denied::Unauthorized),
                }
            }
            None if self.loopback => Ok(()),
            None => Err(Denied::NoTokenOffLoopback),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_required_when_configured_and_off_loopback() {
        let lo: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:1".parse().unwrap();
        let with = Auth::new(Some(ApiToken::new("s3cret")), any);
        assert_eq!(with.check(Some("Bearer s3cret")), Ok(()));
        assert_eq!(with.check(Some("Bearer s3cre")), Err(Denied::Unauthorized));
        assert_eq!(
            with.check(Some("Bearer s3cretx")),
            Err(Denied::Unauthorized)
        );
        assert_eq!(with.check(Some("s3cret")), Err(Denied::Unauthorized));
        assert_eq!(with.check(None), Err(Denied::Unauthorized));
        assert_eq!(Auth::new(None, lo).check(None), Ok(()));
        assert_eq!(
            Auth::new(None, any).check(Some("Bearer x")),
            Err(Denied::NoTokenOffLoopback)
        );
        assert!(!format!("{with:?}").contains("s3cret"));
    }
}
