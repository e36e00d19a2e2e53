//! Typed connection settings: what a Kafka client config's connection and security keys
//! (`security.protocol`, `ssl.*`, `sasl.*`) become once the control plane has parsed them.

use std::fmt;
use std::path::PathBuf;

/// A secret value (password, key password). It never prints: `Debug` and `Display` show
/// `[redacted]`, so a config dump or a log line cannot leak it by accident.
#[derive(Clone, PartialEq, Eq)]
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

/// `sasl.mechanism`. GSSAPI and OAUTHBEARER are not supported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl SaslMechanism {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "PLAIN" => Some(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Some(SaslMechanism::ScramSha256),
            "SCRAM-SHA-512" => Some(SaslMechanism::ScramSha512),
            _ => None,
        }
    }

    /// The name sent in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// SASL credentials (from `sasl.jaas.config`'s `username` and `password`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslConfig {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: Secret,
}

/// Where trusted CA certificates come from (`ssl.truststore.*`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum TrustStore {
    /// No truststore configured: the Mozilla root set bundled through `webpki-roots` (the Java
    /// client would use the JVM's `cacerts`, which holds roughly the same public CAs).
    #[default]
    PublicRoots,
    /// `ssl.truststore.type=PEM` with `ssl.truststore.location`.
    PemFile(PathBuf),
    /// `ssl.truststore.type=PEM` with `ssl.truststore.certificates` (inline PEM text).
    PemInline(String),
    /// `ssl.truststore.type=PKCS12`.
    Pkcs12 {
        path: PathBuf,
        password: Option<Secret>,
    },
    /// `ssl.truststore.type=JKS` (Java's default type).
    Jks {
        path: PathBuf,
        password: Option<Secret>,
    },
}

/// The client's own certificate and key (`ssl.keystore.*`), for brokers with
/// `ssl.client.auth=required`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyStore {
    /// `ssl.keystore.type=PEM` with `ssl.keystore.location`: one file holding an unencrypted
    /// PKCS#8 private key and the certificate chain, leaf first.
    PemFile(PathBuf),
    /// `ssl.keystore.type=PEM` with inline `ssl.keystore.key` and `ssl.keystore.certificate.chain`.
    PemInline {
        key: Secret,
        certificate_chain: String,
    },
    /// `ssl.keystore.type=PKCS12`.
    Pkcs12 {
        path: PathBuf,
        password: Option<Secret>,
    },
}

/// TLS settings of one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    pub truststore: TrustStore,
    pub keystore: Option<KeyStore>,
    /// `ssl.endpoint.identification.algorithm`: `https` (the default) checks the broker's
    /// certificate against the host name we dialled; an empty value turns that check off while
    /// the chain is still verified.
    pub verify_hostname: bool,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            truststore: TrustStore::default(),
            keystore: None,
            verify_hostname: true,
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
        let sasl = SaslConfig {
            mechanism: SaslMechanism::Plain,
            username: "alice".into(),
            password: s,
        };
        assert!(!format!("{sasl:?}").contains("hunter2"));
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
