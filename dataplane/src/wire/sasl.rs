//! SASL client mechanisms as sans-IO state machines: PLAIN (RFC 4616), SCRAM-SHA-256/512
//! (RFC 5802, RFC 7677) and OAUTHBEARER (RFC 7628, as Kafka's `OAuthBearerSaslClient`). They
//! turn server messages into client messages; the connection carries them in SaslAuthenticate
//! requests.
//!
//! Kafka's Java side applies no SASLprep: names and passwords are plain UTF-8, and the username
//! is escaped only for `=` and `,` (`ScramFormatter`). We do the same, so credentials that work
//! for the Java client work here.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::config::{OAuthLogin, SaslConfig, SaslCredentials, SaslMechanism, Secret};
use super::oauth;

/// Iteration bounds Kafka's `ScramMechanism` accepts. A server asking for more is refused, so a
/// hostile server cannot make us burn CPU in PBKDF2.
pub const SCRAM_MIN_ITERATIONS: u32 = 4096;
pub const SCRAM_MAX_ITERATIONS: u32 = 16384;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    #[error("malformed SCRAM server message: {0}")]
    Malformed(String),
    #[error("the server's nonce does not extend ours")]
    NonceMismatch,
    #[error(
        "the server asked for {0} PBKDF2 iterations, outside {SCRAM_MIN_ITERATIONS}..={SCRAM_MAX_ITERATIONS}"
    )]
    Iterations(u32),
    #[error("the server rejected the authentication: {0}")]
    ServerError(String),
    #[error("the server's signature is wrong: it does not know the password (possible impostor)")]
    BadServerSignature,
    #[error("the server sent a message after authentication completed")]
    Unexpected,
    #[error("{mechanism} needs {needs}, which the configuration does not give")]
    Credentials {
        mechanism: &'static str,
        needs: &'static str,
    },
    #[error("the broker refused the OAuth token: {0}")]
    TokenRefused(String),
}

/// One client-side SASL exchange.
#[derive(Debug)]
pub enum SaslClient {
    Plain {
        message: Option<Vec<u8>>,
        done: bool,
    },
    Scram(ScramClient),
    OAuthBearer(OAuthBearerClient),
}

impl SaslClient {
    /// `nonce` must be fresh, unpredictable printable ASCII without `,` (only SCRAM uses it);
    /// see [`fresh_nonce`]. `bearer_token` is the token OAUTHBEARER sends (the driver obtains
    /// it: building or fetching a token is IO and reads the clock).
    pub fn new(
        cfg: &SaslConfig,
        nonce: String,
        bearer_token: Option<&Secret>,
    ) -> Result<Self, SaslError> {
        let mechanism = cfg.mechanism.name();
        match (&cfg.credentials, cfg.mechanism) {
            (SaslCredentials::Password { username, password }, SaslMechanism::Plain) => {
                // authzid (empty) NUL authcid NUL password
                let mut m = Vec::with_capacity(username.len() + password.expose().len() + 2);
                m.push(0);
                m.extend_from_slice(username.as_bytes());
                m.push(0);
                m.extend_from_slice(password.expose().as_bytes());
                Ok(SaslClient::Plain {
                    message: Some(m),
                    done: false,
                })
            }
            (SaslCredentials::Password { username, password }, SaslMechanism::ScramSha256) => {
                Ok(SaslClient::Scram(ScramClient::new(
                    ScramHash::Sha256,
                    username,
                    password.expose(),
                    nonce,
                )))
            }
            (SaslCredentials::Password { username, password }, SaslMechanism::ScramSha512) => {
                Ok(SaslClient::Scram(ScramClient::new(
                    ScramHash::Sha512,
                    username,
                    password.expose(),
                    nonce,
                )))
            }
            (SaslCredentials::OAuthBearer(login), SaslMechanism::OAuthBearer) => {
                let token = bearer_token.ok_or(SaslError::Credentials {
                    mechanism,
                    needs: "a bearer token",
                })?;
                let extensions = match login {
                    OAuthLogin::Unsecured(u) => &u.extensions,
                    OAuthLogin::ClientCredentials(c) => &c.extensions,
                };
                Ok(SaslClient::OAuthBearer(OAuthBearerClient {
                    first: Some(oauth::client_initial_response(token, extensions)),
                    state: OAuthState::SentFirst,
                }))
            }
            (SaslCredentials::Password { .. }, SaslMechanism::OAuthBearer) => {
                Err(SaslError::Credentials {
                    mechanism,
                    needs: "an OAuth login module",
                })
            }
            (SaslCredentials::OAuthBearer(_), _) => Err(SaslError::Credentials {
                mechanism,
                needs: "a username and password",
            }),
        }
    }

    /// The first client message.
    pub fn start(&mut self) -> Vec<u8> {
        match self {
            SaslClient::Plain { message, .. } => message.take().unwrap_or_default(),
            SaslClient::Scram(s) => s.client_first(),
            SaslClient::OAuthBearer(o) => o.first.take().unwrap_or_default(),
        }
    }

    /// Handles a server message. `Some(msg)` is the next client message; `None` means the
    /// exchange is complete and authenticated on our side.
    pub fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        match self {
            SaslClient::Plain { done, .. } => {
                if *done {
                    return Err(SaslError::Unexpected);
                }
                *done = true;
                Ok(None)
            }
            SaslClient::Scram(s) => s.step(server),
            SaslClient::OAuthBearer(o) => o.step(server),
        }
    }

    pub fn is_complete(&self) -> bool {
        match self {
            SaslClient::Plain { done, .. } => *done,
            SaslClient::Scram(s) => matches!(s.state, ScramState::Done),
            SaslClient::OAuthBearer(o) => matches!(o.state, OAuthState::Done),
        }
    }

    /// What the server said when it refused the exchange, if it said more than its error code
    /// (OAUTHBEARER's JSON error, RFC 7628 §3.2.2). Holds no credentials.
    pub fn server_error(&self) -> Option<&str> {
        match self {
            SaslClient::OAuthBearer(OAuthBearerClient {
                state: OAuthState::SentAfterError { server_error },
                ..
            }) => Some(server_error),
            _ => None,
        }
    }
}

/// The OAUTHBEARER exchange (RFC 7628 §3.2): the client initial response carries the token; an
/// empty server response is success; a non-empty one is a JSON error, which the client
/// acknowledges with a single `%x01` so the server can fail the exchange.
#[derive(Debug)]
pub struct OAuthBearerClient {
    first: Option<Vec<u8>>,
    state: OAuthState,
}

#[derive(Debug)]
enum OAuthState {
    SentFirst,
    SentAfterError { server_error: String },
    Done,
}

/// Longest server error kept for messages.
const MAX_SERVER_ERROR_CHARS: usize = 300;

impl OAuthBearerClient {
    fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        match &self.state {
            OAuthState::SentFirst if server.is_empty() => {
                self.state = OAuthState::Done;
                Ok(None)
            }
            OAuthState::SentFirst => {
                let server_error: String = String::from_utf8_lossy(server)
                    .chars()
                    .take(MAX_SERVER_ERROR_CHARS)
                    .collect();
                self.state = OAuthState::SentAfterError { server_error };
                Ok(Some(vec![0x01]))
            }
            OAuthState::SentAfterError { server_error } => {
                Err(SaslError::TokenRefused(server_error.clone()))
            }
            OAuthState::Done => Err(SaslError::Unexpected),
        }
    }
}

/// A fresh SCRAM nonce from the OS random source: 24 random bytes, base64 (32 characters, no
/// comma). The only non-deterministic input of this module, taken by the caller.
pub fn fresh_nonce() -> Result<String, getrandom::Error> {
    let mut raw = [0u8; 24];
    getrandom::fill(&mut raw)?;
    Ok(B64.encode(raw))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramHash {
    Sha256,
    Sha512,
}

#[derive(Debug)]
enum ScramState {
    Initial,
    SentFirst,
    SentFinal { server_signature: Vec<u8> },
    Done,
}

/// SCRAM client (RFC 5802 without channel binding: GS2 header `n,,`).
#[derive(Debug)]
pub struct ScramClient {
    hash: ScramHash,
    username: String,
    password: String,
    client_nonce: String,
    client_first_bare: String,
    state: ScramState,
}

impl ScramClient {
    pub fn new(hash: ScramHash, username: &str, password: &str, client_nonce: String) -> Self {
        let client_first_bare = format!("n={},r={}", escape_saslname(username), client_nonce);
        ScramClient {
            hash,
            username: username.to_string(),
            password: password.to_string(),
            client_nonce,
            client_first_bare,
            state: ScramState::Initial,
        }
    }

    pub fn username(&self) -> &str {
        &self.username
    }

    pub fn client_first(&mut self) -> Vec<u8> {
        self.state = ScramState::SentFirst;
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    pub fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        let msg = std::str::from_utf8(server)
            .map_err(|_| SaslError::Malformed("not UTF-8".to_string()))?;
        match std::mem::replace(&mut self.state, ScramState::Done) {
            ScramState::SentFirst => {
                let (final_msg, server_signature) = self.handle_server_first(msg)?;
                self.state = ScramState::SentFinal { server_signature };
                Ok(Some(final_msg.into_bytes()))
            }
            ScramState::SentFinal { server_signature } => {
                self.handle_server_final(msg, &server_signature)?;
                Ok(None)
            }
            ScramState::Initial | ScramState::Done => Err(SaslError::Unexpected),
        }
    }

    fn handle_server_first(&self, server_first: &str) -> Result<(String, Vec<u8>), SaslError> {
        if let Some(e) = attr(server_first, 'e') {
            return Err(SaslError::ServerError(e.to_string()));
        }
        let nonce = attr(server_first, 'r')
            .ok_or_else(|| SaslError::Malformed("no nonce (r=)".to_string()))?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err(SaslError::NonceMismatch);
        }
        let salt = attr(server_first, 's')
            .ok_or_else(|| SaslError::Malformed("no salt (s=)".to_string()))?;
        let salt = B64
            .decode(salt)
            .map_err(|_| SaslError::Malformed("salt is not base64".to_string()))?;
        let iterations: u32 = attr(server_first, 'i')
            .ok_or_else(|| SaslError::Malformed("no iteration count (i=)".to_string()))?
            .parse()
            .map_err(|_| SaslError::Malformed("iteration count is not a number".to_string()))?;
        if !(SCRAM_MIN_ITERATIONS..=SCRAM_MAX_ITERATIONS).contains(&iterations) {
            return Err(SaslError::Iterations(iterations));
        }

        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, server_first, without_proof
        );
        let keys = ScramKeys::derive(self.hash, self.password.as_bytes(), &salt, iterations);
        let client_signature = hmac(self.hash, &keys.stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = keys
            .client_key
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_signature = hmac(self.hash, &keys.server_key, auth_message.as_bytes());
        Ok((
            format!("{without_proof},p={}", B64.encode(proof)),
            server_signature,
        ))
    }

    fn handle_server_final(&self, server_final: &str, expected: &[u8]) -> Result<(), SaslError> {
        if let Some(e) = attr(server_final, 'e') {
            return Err(SaslError::ServerError(e.to_string()));
        }
        let v = attr(server_final, 'v')
            .ok_or_else(|| SaslError::Malformed("no verifier (v=)".to_string()))?;
        let got = B64
            .decode(v)
            .map_err(|_| SaslError::Malformed("verifier is not base64".to_string()))?;
        if got != expected {
            return Err(SaslError::BadServerSignature);
        }
        Ok(())
    }
}

/// The keys both sides derive from a password (RFC 5802 §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramKeys {
    pub client_key: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramKeys {
    pub fn derive(hash: ScramHash, password: &[u8], salt: &[u8], iterations: u32) -> Self {
        let salted = match hash {
            ScramHash::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            ScramHash::Sha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        };
        let client_key = hmac(hash, &salted, b"Client Key");
        let stored_key = match hash {
            ScramHash::Sha256 => Sha256::digest(&client_key).to_vec(),
            ScramHash::Sha512 => Sha512::digest(&client_key).to_vec(),
        };
        let server_key = hmac(hash, &salted, b"Server Key");
        ScramKeys {
            client_key,
            stored_key,
            server_key,
        }
    }
}

/// HMAC with the mechanism's hash.
pub fn hmac(hash: ScramHash, key: &[u8], data: &[u8]) -> Vec<u8> {
    match hash {
        ScramHash::Sha256 => {
            let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key)
                .expect("HMAC accepts keys of any length");
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
        ScramHash::Sha512 => {
            let mut m = <Hmac<Sha512> as Mac>::new_from_slice(key)
                .expect("HMAC accepts keys of any length");
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
    }
}

/// `=` → `=3D`, `,` → `=2C` (RFC 5802 saslname).
pub fn escape_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// The value of attribute `key` in a SCRAM message (`k=v,k=v`).
fn attr(msg: &str, key: char) -> Option<&str> {
    msg.split(',').find_map(|part| {
        let mut chars = part.chars();
        if chars.next() == Some(key) && chars.next() == Some('=') {
            Some(&part[2..])
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::config::UnsecuredLogin;
    use proptest::prelude::*;

    /// RFC 7677 §3: the SCRAM-SHA-256 example exchange.
    #[test]
    fn rfc7677_test_vector() {
        let mut c = ScramClient::new(
            ScramHash::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".to_string(),
        );
        assert_eq!(c.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final = c.step(server_first).unwrap().unwrap();
        assert_eq!(
            std::str::from_utf8(&client_final).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            c.step(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
                .unwrap(),
            None
        );
        assert!(matches!(c.state, ScramState::Done));
    }

    #[test]
    fn wrong_server_signature_is_refused() {
        let mut c = ScramClient::new(
            ScramHash::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".to_string(),
        );
        c.client_first();
        c.step(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap();
        assert_eq!(
            c.step(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Err(SaslError::BadServerSignature)
        );
    }

    #[test]
    fn hostile_server_first_messages() {
        let first = |m: &[u8]| {
            let mut c = ScramClient::new(ScramHash::Sha512, "u", "p", "abc".to_string());
            c.client_first();
            c.step(m)
        };
        assert_eq!(first(b"r=xyz,s=AAAA,i=4096"), Err(SaslError::NonceMismatch));
        assert_eq!(first(b"r=abc,s=AAAA,i=4096"), Err(SaslError::NonceMismatch));
        assert_eq!(
            first(b"r=abcd,s=AAAA,i=99999999"),
            Err(SaslError::Iterations(99999999))
        );
        assert_eq!(first(b"r=abcd,s=AAAA,i=1"), Err(SaslError::Iterations(1)));
        assert!(matches!(
            first(b"r=abcd,s=!!,i=4096"),
            Err(SaslError::Malformed(_))
        ));
        assert!(matches!(first(b"garbage"), Err(SaslError::Malformed(_))));
        assert!(matches!(first(b"\xff\xfe"), Err(SaslError::Malformed(_))));
        assert_eq!(
            first(b"e=unknown-user"),
            Err(SaslError::ServerError("unknown-user".into()))
        );
    }

    #[test]
    fn plain_message_layout() {
        let cfg = SaslConfig::password(SaslMechanism::Plain, "alice", Secret::new("alice-secret"));
        let mut c = SaslClient::new(&cfg, String::new(), None).unwrap();
        assert_eq!(c.start(), b"\0alice\0alice-secret");
        assert!(!c.is_complete());
        assert_eq!(c.step(b""), Ok(None));
        assert!(c.is_complete());
        assert_eq!(c.step(b""), Err(SaslError::Unexpected));
    }

    fn oauth_config() -> SaslConfig {
        SaslConfig {
            mechanism: SaslMechanism::OAuthBearer,
            credentials: SaslCredentials::OAuthBearer(OAuthLogin::Unsecured(UnsecuredLogin {
                principal_claim_name: "sub".into(),
                lifetime_seconds: 3600,
                claims: Vec::new(),
                extensions: vec![("traceId".into(), "abc".into())],
            })),
        }
    }

    #[test]
    fn oauthbearer_success_and_refusal() {
        let token = Secret::new("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.");
        let mut c = SaslClient::new(&oauth_config(), String::new(), Some(&token)).unwrap();
        assert_eq!(
            c.start(),
            b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.\x01traceId=abc\x01\x01"
        );
        assert_eq!(c.step(b""), Ok(None));
        assert!(c.is_complete());

        let mut c = SaslClient::new(&oauth_config(), String::new(), Some(&token)).unwrap();
        c.start();
        let refusal = br#"{"status":"invalid_token"}"#;
        assert_eq!(c.step(refusal), Ok(Some(vec![0x01])));
        assert!(!c.is_complete());
        assert_eq!(c.server_error(), Some(r#"{"status":"invalid_token"}"#));
        assert!(matches!(c.step(b"x"), Err(SaslError::TokenRefused(_))));
    }

    #[test]
    fn mechanisms_need_matching_credentials() {
        let err = SaslClient::new(&oauth_config(), String::new(), None).unwrap_err();
        assert!(err.to_string().contains("bearer token"), "{err}");
        let mut wrong = SaslConfig::password(SaslMechanism::OAuthBearer, "u", Secret::new("p"));
        assert!(SaslClient::new(&wrong, String::new(), None).is_err());
        wrong = oauth_config();
        wrong.mechanism = SaslMechanism::Plain;
        assert!(SaslClient::new(&wrong, String::new(), None).is_err());
    }

    #[test]
    fn saslname_escaping() {
        assert_eq!(escape_saslname("a=b,c"), "a=3Db=2Cc");
    }

    /// A minimal SCRAM server, written from RFC 5802's server side, to run the client against.
    struct TestServer {
        hash: ScramHash,
        keys: ScramKeys,
        salt: Vec<u8>,
        iterations: u32,
        server_nonce: String,
        user: String,
    }

    impl TestServer {
        /// Returns (server-first, auth-message prefix).
        fn first(&self, client_first: &str) -> (String, String, String) {
            let bare = client_first.strip_prefix("n,,").expect("gs2 header");
            let n = attr(bare, 'n').unwrap();
            assert_eq!(n, escape_saslname(&self.user));
            let cnonce = attr(bare, 'r').unwrap();
            let nonce = format!("{cnonce}{}", self.server_nonce);
            let sf = format!(
                "r={nonce},s={},i={}",
                B64.encode(&self.salt),
                self.iterations
            );
            (sf, bare.to_string(), nonce)
        }

        fn last(
            &self,
            bare: &str,
            sf: &str,
            nonce: &str,
            client_final: &str,
        ) -> Result<String, ()> {
            let without_proof = format!("c=biws,r={nonce}");
            let proof_b64 = client_final
                .strip_prefix(&format!("{without_proof},p="))
                .ok_or(())?;
            let proof = B64.decode(proof_b64).map_err(|_| ())?;
            let auth = format!("{bare},{sf},{without_proof}");
            let sig = hmac(self.hash, &self.keys.stored_key, auth.as_bytes());
            let client_key: Vec<u8> = proof.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
            let stored = match self.hash {
                ScramHash::Sha256 => Sha256::digest(&client_key).to_vec(),
                ScramHash::Sha512 => Sha512::digest(&client_key).to_vec(),
            };
            if stored != self.keys.stored_key {
                return Err(());
            }
            Ok(format!(
                "v={}",
                B64.encode(hmac(self.hash, &self.keys.server_key, auth.as_bytes()))
            ))
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Client and server agree for arbitrary users, passwords, salts and nonces, and a wrong
        /// password is always detected by the server.
        #[test]
        fn scram_round_trip(
            sha512 in any::<bool>(),
            user in "[a-zA-Z0-9=,@._-]{1,16}",
            password in "\\PC{0,24}",
            wrong in "\\PC{1,8}",
            salt in proptest::collection::vec(any::<u8>(), 1..32),
            iterations in 4096u32..4200,
            cnonce in "[a-zA-Z0-9+/]{8,32}",
            snonce in "[a-zA-Z0-9+/]{8,32}",
        ) {
            let hash = if sha512 { ScramHash::Sha512 } else { ScramHash::Sha256 };
            let server = TestServer {
                hash,
                keys: ScramKeys::derive(hash, password.as_bytes(), &salt, iterations),
                salt: salt.clone(),
                iterations,
                server_nonce: snonce,
                user: user.clone(),
            };

            let mut c = ScramClient::new(hash, &user, &password, cnonce.clone());
            let cf = String::from_utf8(c.client_first()).unwrap();
            let (sf, bare, nonce) = server.first(&cf);
            let cfin = String::from_utf8(c.step(sf.as_bytes()).unwrap().unwrap()).unwrap();
            let sfin = server.last(&bare, &sf, &nonce, &cfin).expect("server accepts the proof");
            prop_assert_eq!(c.step(sfin.as_bytes()).unwrap(), None);

            let bad_password = format!("{password}{wrong}");
            let mut bad = ScramClient::new(hash, &user, &bad_password, cnonce);
            let cf = String::from_utf8(bad.client_first()).unwrap();
            let (sf, bare, nonce) = server.first(&cf);
            let cfin = String::from_utf8(bad.step(sf.as_bytes()).unwrap().unwrap()).unwrap();
            prop_assert!(server.last(&bare, &sf, &nonce, &cfin).is_err());
        }
    }
}
