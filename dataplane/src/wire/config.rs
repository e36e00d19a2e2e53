//! Typed connection settings: what a Kafka client config's connection and security keys
//! (`security.protocol`, `ssl.*`, `sasl.*`) become once the control plane has parsed them.

use std::fmt;
use std::path::PathBuf;

/// A secret value (password, key password). It never prints: `Debug` and `Display` show
/// `[redacted]`, so a config dump or a log line cannot leak it by accident.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself. The name makes every use of it easy to find in review.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// `security.protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// Parses Kafka's names (case-insensitive, as the Java client accepts them).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// `sasl.mechanism`. GSSAPI (Kerberos) is not supported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    /// RFC 7628 bearer tokens (KIP-255), from Kafka's unsecured login module or the OIDC
    /// client-credentials flow (KIP-768).
    OAuthBearer,
}

impl SaslMechanism {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "PLAIN" => Some(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Some(SaslMechanism::ScramSha256),
            "SCRAM-SHA-512" => Some(SaslMechanism::ScramSha512),
            "OAUTHBEARER" => Some(SaslMechanism::OAuthBearer),
            _ => None,
        }
    }

    /// The name sent in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// SASL settings of one cluster: the mechanism and what it authenticates with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslConfig {
    pub mechanism: SaslMechanism,
    pub credentials: SaslCredentials,
}

impl SaslConfig {
    /// PLAIN or SCRAM credentials.
    pub fn password(
        mechanism: SaslMechanism,
        username: impl Into<String>,
        password: Secret,
    ) -> Self {
        SaslConfig {
            mechanism,
            credentials: SaslCredentials::Password {
                username: username.into(),
                password,
            },
        }
    }

    /// The user name and password of PLAIN and SCRAM credentials.
    pub fn user_password(&self) -> Option<(&str, &Secret)> {
        match &self.credentials {
            SaslCredentials::Password { username, password } => Some((username, password)),
            SaslCredentials::OAuthBearer(_) => None,
        }
    }

    /// Who authenticates, for messages: the user name, or the OAuth principal or client id.
    pub fn principal(&self) -> &str {
        match &self.credentials {
            SaslCredentials::Password { username, .. } => username,
            SaslCredentials::OAuthBearer(OAuthLogin::Unsecured(u)) => u.principal(),
            SaslCredentials::OAuthBearer(OAuthLogin::ClientCredentials(c)) => &c.client_id,
        }
    }
}

/// What a SASL mechanism authenticates with (from `sasl.jaas.config` and the `sasl.*` keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaslCredentials {
    /// PLAIN and SCRAM: the login module's `username` and `password`.
    Password { username: String, password: Secret },
    /// OAUTHBEARER: where the bearer token comes from.
    OAuthBearer(OAuthLogin),
}

/// How an OAUTHBEARER client gets its token.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OAuthLogin {
    /// Kafka's default login callback handler, `OAuthBearerUnsecuredLoginCallbackHandler`: an
    /// unsigned JWS built locally from the `unsecuredLogin*` JAAS options. For tests and
    /// development only; brokers accept it only with the unsecured validator.
    Unsecured(UnsecuredLogin),
    /// `OAuthBearerLoginCallbackHandler` (KIP-768): a token from an OAuth/OIDC token endpoint
    /// with the client-credentials grant, or read from a file for `file:` URLs. Boxed: it is
    /// large and rare.
    ClientCredentials(Box<ClientCredentials>),
}

/// The `unsecuredLogin*` options of Kafka's unsecured login module.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UnsecuredLogin {
    /// `unsecuredLoginPrincipalClaimName`, default `sub`.
    pub principal_claim_name: String,
    /// `unsecuredLoginLifetimeSeconds`, default 3600.
    pub lifetime_seconds: i64,
    /// `unsecuredLoginStringClaim_<name>`, `unsecuredLoginNumberClaim_<name>`,
    /// `unsecuredLoginListClaim_<name>`, in name order.
    pub claims: Vec<(String, ClaimValue)>,
    /// `unsecuredLoginExtension_<key>`: SASL extensions sent with the token.
    pub extensions: Vec<(String, String)>,
}

impl UnsecuredLogin {
    /// The principal claim's value (empty when the options name none).
    pub fn principal(&self) -> &str {
        self.claims
            .iter()
            .find_map(|(name, v)| match v {
                ClaimValue::String(s) if *name == self.principal_claim_name => Some(s.as_str()),
                _ => None,
            })
            .unwrap_or("")
    }
}

/// One claim of an unsecured token.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClaimValue {
    String(String),
    /// A JSON number, as written in the option (validated as a number).
    Number(String),
    List(Vec<String>),
}

/// The OIDC client-credentials login (`OAuthBearerLoginCallbackHandler`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientCredentials {
    /// `sasl.oauthbearer.token.endpoint.url`: `http://`, `https://` or `file:`.
    pub token_endpoint_url: String,
    /// `clientId` (JAAS) or `sasl.oauthbearer.client.credentials.client.id`.
    pub client_id: String,
    /// `clientSecret` (JAAS) or `sasl.oauthbearer.client.credentials.client.secret`.
    pub client_secret: Secret,
    /// `scope` (JAAS) or `sasl.oauthbearer.scope`; sent only when set.
    pub scope: Option<String>,
    /// `extension_<key>` JAAS options: SASL extensions sent with the token.
    pub extensions: Vec<(String, String)>,
    /// `sasl.oauthbearer.header.urlencode`: URL-encode the id and secret in the Basic header.
    pub urlencode_header: bool,
    /// `sasl.oauthbearer.sub.claim.name` (default `sub`): the token must carry this claim.
    pub sub_claim_name: String,
    /// TLS for an `https` endpoint, from the `ssl.*` options inside the JAAS line (as Kafka's
    /// `JaasOptionsUtils` reads them); public roots when none are given.
    pub tls: TlsConfig,
    /// `sasl.login.connect.timeout.ms`. Kafka's default is none (wait forever); strait's is
    /// 10 000 ms.
    pub connect_timeout_ms: u64,
    /// `sasl.login.read.timeout.ms`. Kafka's default is none; strait's is 10 000 ms.
    pub read_timeout_ms: u64,
    /// `sasl.login.retry.backoff.ms` (default 100): the first wait between attempts, doubled
    /// after each.
    pub retry_backoff_ms: u64,
    /// `sasl.login.retry.backoff.max.ms` (default 10 000): attempts stop once this much time
    /// has passed since the first.
    pub retry_backoff_max_ms: u64,
    pub refresh: TokenRefresh,
}

/// When a token is replaced (`sasl.login.refresh.*`, Kafka's `ExpiringCredentialRefreshingLogin`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenRefresh {
    /// `sasl.login.refresh.window.factor` (0.5..=1.0, default 0.8): refresh after this share of
    /// the token's lifetime.
    pub window_factor: f64,
    /// `sasl.login.refresh.window.jitter` (0..=0.25, default 0.05): plus up to this share.
    pub window_jitter: f64,
    /// `sasl.login.refresh.min.period.seconds` (0..=900, default 60).
    pub min_period_seconds: u64,
    /// `sasl.login.refresh.buffer.seconds` (0..=3600, default 300): refresh at least this long
    /// before expiry.
    pub buffer_seconds: u64,
}

impl Default for TokenRefresh {
    fn default() -> Self {
        TokenRefresh {
            window_factor: 0.8,
            window_jitter: 0.05,
            min_period_seconds: 60,
            buffer_seconds: 300,
        }
    }
}

// The factors come from validated config (finite, in range): equality and hashing of their bits
// is exact.
impl Eq for TokenRefresh {}

impl std::hash::Hash for TokenRefresh {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.window_factor.to_bits().hash(state);
        self.window_jitter.to_bits().hash(state);
        self.min_period_seconds.hash(state);
        self.buffer_seconds.hash(state);
    }
}

/// Where trusted CA certificates come from (`ssl.truststore.*`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum TrustStore {
    /// No truststore configured: the Mozilla root set bundled through `webpki-roots` (the Java
    /// client would use the JVM's `cacerts`, which holds roughly the same public CAs).
    #[default]
    PublicRoots,
    /// `ssl.truststore.type=PEM` with `ssl.truststore.location`.
    PemFile(PathBuf),
    /// `ssl.truststore.type=PEM` with `ssl.truststore.certificates` (inline PEM text).
    PemInline(String),
    /// `ssl.truststore.type=PKCS12`. A JKS file is read too (Java's `keystore.type.compat`).
    Pkcs12 {
        path: PathBuf,
        password: Option<Secret>,
    },
    /// `ssl.truststore.type=JKS` (Java's default type). The format is detected from the file's
    /// content, so a PKCS#12 file (what `keytool` writes by default) is read too.
    Jks {
        path: PathBuf,
        password: Option<Secret>,
    },
}

/// The client's own certificate and key (`ssl.keystore.*`), for brokers with
/// `ssl.client.auth=required`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeyStore {
    /// `ssl.keystore.type=PEM` with `ssl.keystore.location`: one file holding a PKCS#8 private
    /// key (encrypted when `key_password` is set) and the certificate chain, leaf first.
    PemFile {
        path: PathBuf,
        /// `ssl.key.password`: the key is an `ENCRYPTED PRIVATE KEY` block.
        key_password: Option<Secret>,
    },
    /// `ssl.keystore.type=PEM` with inline `ssl.keystore.key` and `ssl.keystore.certificate.chain`.
    PemInline {
        key: Secret,
        certificate_chain: String,
        key_password: Option<Secret>,
    },
    /// `ssl.keystore.type=PKCS12`; a JKS file is read too.
    Pkcs12 {
        path: PathBuf,
        password: Option<Secret>,
        /// `ssl.key.password`; the store password when unset.
        key_password: Option<Secret>,
    },
    /// `ssl.keystore.type=JKS` (the default); a PKCS#12 file is read too.
    Jks {
        path: PathBuf,
        password: Option<Secret>,
        /// `ssl.key.password`; the store password when unset.
        key_password: Option<Secret>,
    },
}

/// The TLS versions a client offers (`ssl.enabled.protocols`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TlsVersions {
    pub tls12: bool,
    pub tls13: bool,
}

impl Default for TlsVersions {
    fn default() -> Self {
        TlsVersions {
            tls12: true,
            tls13: true,
        }
    }
}

/// TLS settings of one cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TlsConfig {
    pub truststore: TrustStore,
    pub keystore: Option<KeyStore>,
    /// `ssl.endpoint.identification.algorithm`: `https` (the default) checks the broker's
    /// certificate against the host name we dialled; an empty value turns that check off while
    /// the chain is still verified.
    pub verify_hostname: bool,
    /// `ssl.enabled.protocols` (default TLSv1.2 and TLSv1.3; at least one is on).
    pub versions: TlsVersions,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            truststore: TrustStore::default(),
            keystore: None,
            verify_hostname: true,
            versions: TlsVersions::default(),
        }
    }
}

/// Everything needed to open one authenticated connection to a broker of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnConfig {
    /// Sent in every request header (`client.id`).
    pub client_id: String,
    pub security_protocol: SecurityProtocol,
    /// Required when `security_protocol` uses TLS.
    pub tls: Option<TlsConfig>,
    /// Required when `security_protocol` uses SASL.
    pub sasl: Option<SaslConfig>,
    /// Time allowed for TCP connect, TLS, ApiVersions and SASL together. Default 10 000 ms.
    pub connect_timeout_ms: u64,
    /// Time allowed for one request's response (`request.timeout.ms`; Kafka's default 30 000 ms).
    pub request_timeout_ms: u64,
    /// The largest response frame accepted. A broker's response can exceed `fetch.max.bytes`
    /// by one batch, so this must stay above it. Default 128 MiB; memory held per connection is
    /// bounded by it.
    pub max_response_bytes: usize,
    /// Requests written but not yet answered on one connection. Default 32.
    pub max_in_flight_requests: usize,
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            client_id: "strait".to_string(),
            security_protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl: None,
            connect_timeout_ms: 10_000,
            request_timeout_ms: 30_000,
            max_response_bytes: 128 * 1024 * 1024,
            max_in_flight_requests: 32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "[redacted] [redacted]");
        let sasl = SaslConfig::password(SaslMechanism::Plain, "alice", s.clone());
        assert!(!format!("{sasl:?}").contains("hunter2"));
        let oauth = SaslConfig {
            mechanism: SaslMechanism::OAuthBearer,
            credentials: SaslCredentials::OAuthBearer(OAuthLogin::ClientCredentials(Box::new(
                ClientCredentials {
                    token_endpoint_url: "https://idp.example/token".into(),
                    client_id: "strait".into(),
                    client_secret: s.clone(),
                    scope: None,
                    extensions: Vec::new(),
                    urlencode_header: false,
                    sub_claim_name: "sub".into(),
                    tls: TlsConfig {
                        keystore: Some(KeyStore::Jks {
                            path: "/k.jks".into(),
                            password: Some(s.clone()),
                            key_password: Some(s.clone()),
                        }),
                        ..TlsConfig::default()
                    },
                    connect_timeout_ms: 1,
                    read_timeout_ms: 1,
                    retry_backoff_ms: 1,
                    retry_backoff_max_ms: 1,
                    refresh: TokenRefresh::default(),
                },
            ))),
        };
        assert!(!format!("{oauth:?}").contains("hunter2"));
        let inline = KeyStore::PemInline {
            key: s.clone(),
            certificate_chain: String::new(),
            key_password: Some(s),
        };
        assert!(!format!("{inline:?}").contains("hunter2"));
    }

    #[test]
    fn protocol_names_round_trip() {
        for p in [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ] {
            assert_eq!(SecurityProtocol::parse(p.name()), Some(p));
        }
        assert_eq!(
            SecurityProtocol::parse("sasl_ssl"),
            Some(SecurityProtocol::SaslSsl)
        );
        assert_eq!(SecurityProtocol::parse("TLS"), None);
    }
}
