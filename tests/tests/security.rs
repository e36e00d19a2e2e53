//! Client security against real brokers: Java trust stores as keytool writes them, mutual TLS
//! with every key store form, SASL_PLAINTEXT, and OAUTHBEARER (Kafka's unsecured login, and the
//! OIDC client-credentials login against a local token endpoint).
//!
//! They run against the test bed's source cluster (`scripts/testbed`): its SSL listener requires a
//! client certificate (`STRAIT_SOURCE_SSL_BOOTSTRAP`), its SASL_PLAINTEXT listener offers PLAIN and
//! OAUTHBEARER (`STRAIT_SOURCE_SASL_PLAINTEXT_BOOTSTRAP`), and its SASL_SSL listener offers
//! OAUTHBEARER too (`STRAIT_SOURCE_OAUTH_SASL_SSL_BOOTSTRAP`), both with Kafka's unsecured validator.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use kafka_protocol::messages::MetadataRequest;
use strait_dataplane::io::{BrokerConn, IoBackend};
use strait_dataplane::wire::{
    ClaimValue, ClientCredentials, ConnConfig, KeyStore, OAuthLogin, SaslConfig, SaslCredentials,
    SaslMechanism, Secret, SecurityProtocol, TlsConfig, TokenRefresh, TrustStore, UnsecuredLogin,
    WireError,
};
use strait_tests::oauth::token_endpoint;
use strait_tests::{Testbed, on_each_backend, setup};

/// Connects and asks for metadata: the connection is authenticated and usable.
async fn connect_and_describe(
    addr: &str,
    cfg: ConnConfig,
    backend: IoBackend,
) -> Result<(), WireError> {
    let conn = BrokerConn::connect(addr, &setup(cfg, backend)).await?;
    let v = conn.version_for::<MetadataRequest>()?;
    let md = conn
        .send(&MetadataRequest::default().with_topics(Some(Vec::new())), v)
        .await?
        .decode::<MetadataRequest>()
        .await?;
    assert!(!md.brokers.is_empty(), "{addr}: no brokers in the metadata");
    Ok(())
}

fn tls_to_testbed_ca(tb: &Testbed) -> TlsConfig {
    TlsConfig {
        truststore: TrustStore::PemFile(tb.ca_pem()),
        ..TlsConfig::default()
    }
}

/// Issue 14: `keytool -importcert` without `-storetype` writes PKCS#12, even into
/// `truststore.jks`; with no `ssl.truststore.type` (JKS) Java reads it, and so must strait.
#[test]
fn keytool_default_truststore_named_jks() {
    let tb = Testbed::get();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("truststore.jks");
    let out = Command::new("keytool")
        .args(["-importcert", "-noprompt", "-alias", "ca", "-file"])
        .arg(tb.ca_pem())
        .arg("-keystore")
        .arg(&path)
        .args(["-storepass", "ts-pass-123"])
        .output()
        .expect("keytool runs (a JDK is needed for the test bed anyway)");
    assert!(
        out.status.success(),
        "keytool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = std::fs::read(&path).unwrap();
    assert_eq!(
        head[0], 0x30,
        "keytool wrote PKCS#12 (a DER SEQUENCE), as the issue says"
    );
    on_each_backend(|backend| {
        let path = path.clone();
        async move {
            let mut cfg = tb.sasl_ssl(SaslMechanism::ScramSha512);
            cfg.tls.as_mut().unwrap().truststore = TrustStore::Jks {
                path: path.clone(),
                password: Some(Secret::new("ts-pass-123")),
            };
            connect_and_describe(tb.source_sasl_ssl(), cfg.clone(), backend)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            // A wrong store password is a clear error naming the file, not the password.
            cfg.tls.as_mut().unwrap().truststore = TrustStore::Jks {
                path: path.clone(),
                password: Some(Secret::new("not-it-999")),
            };
            let err = strait_dataplane::io::ConnSetup::new(cfg, backend)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("truststore.jks") && err.contains("password"),
                "{err}"
            );
            assert!(!err.contains("not-it-999"), "{err}");
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Mutual TLS (needs STRAIT_SOURCE_SSL_BOOTSTRAP: an SSL listener with ssl.client.auth=required).

fn keystores(tb: &Testbed) -> Vec<(&'static str, KeyStore)> {
    let store_pw = || Some(Secret::new(tb.var("STRAIT_TLS_CLIENT_P12_PASSWORD")));
    let key_pw = || Some(Secret::new(tb.var("STRAIT_TLS_CLIENT_KEY_PASSWORD")));
    let path = |v: &str| PathBuf::from(tb.var(v));
    vec![
        (
            "PEM",
            KeyStore::PemFile {
                path: path("STRAIT_TLS_CLIENT_PEM"),
                key_password: None,
            },
        ),
        (
            "encrypted PEM (PBES2)",
            KeyStore::PemFile {
                path: path("STRAIT_TLS_CLIENT_ENC_PEM"),
                key_password: key_pw(),
            },
        ),
        (
            "encrypted PEM (PBE-SHA1-3DES)",
            KeyStore::PemFile {
                path: path("STRAIT_TLS_CLIENT_ENC_3DES_PEM"),
                key_password: key_pw(),
            },
        ),
        (
            "PKCS12",
            KeyStore::Pkcs12 {
                path: path("STRAIT_TLS_CLIENT_P12"),
                password: store_pw(),
                key_password: None,
            },
        ),
        (
            "JKS",
            KeyStore::Jks {
                path: path("STRAIT_TLS_CLIENT_JKS"),
                password: store_pw(),
                key_password: key_pw(),
            },
        ),
    ]
}

fn ssl(tb: &Testbed, keystore: Option<KeyStore>) -> ConnConfig {
    ConnConfig {
        client_id: "strait-test".into(),
        security_protocol: SecurityProtocol::Ssl,
        tls: Some(TlsConfig {
            keystore,
            ..tls_to_testbed_ca(tb)
        }),
        ..ConnConfig::default()
    }
}

#[test]
fn mutual_tls_with_every_key_store_type() {
    let tb = Testbed::get();
    let addr = tb.var("STRAIT_SOURCE_SSL_BOOTSTRAP");
    on_each_backend(|backend| async move {
        for (what, ks) in keystores(tb) {
            connect_and_describe(addr, ssl(tb, Some(ks)), backend)
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    });
}

#[test]
fn mutual_tls_without_a_client_certificate_is_explained_at_once() {
    let tb = Testbed::get();
    let addr = tb.var("STRAIT_SOURCE_SSL_BOOTSTRAP");
    on_each_backend(|backend| async move {
        let cfg = ssl(tb, None);
        let connect_timeout = Duration::from_millis(cfg.connect_timeout_ms);
        let started = Instant::now();
        let err = connect_and_describe(addr, cfg, backend)
            .await
            .expect_err("the broker requires a client certificate");
        let text = err.to_string();
        assert!(!err.is_retriable(), "{text}");
        assert!(
            text.contains(addr) && text.contains("ssl.keystore"),
            "{text}"
        );
        // The broker's refusal ends it, not a timer: within the connect timeout that bounds
        // the whole setup (TCP, TLS, ApiVersions).
        assert!(
            started.elapsed() < connect_timeout,
            "{:?}, not within the connect timeout ({connect_timeout:?}): a timer ended it",
            started.elapsed()
        );
    });
}

// ---------------------------------------------------------------------------------------------
// SASL_PLAINTEXT and OAUTHBEARER (needs STRAIT_SOURCE_SASL_PLAINTEXT_BOOTSTRAP with PLAIN and
// OAUTHBEARER, the latter with Kafka's unsecured validator, and OAUTHBEARER on SASL_SSL).

fn sasl(protocol: SecurityProtocol, tls: Option<TlsConfig>, sasl: SaslConfig) -> ConnConfig {
    ConnConfig {
        client_id: "strait-test".into(),
        security_protocol: protocol,
        tls,
        sasl: Some(sasl),
        ..ConnConfig::default()
    }
}

fn unsecured(sub: &str) -> SaslConfig {
    SaslConfig {
        mechanism: SaslMechanism::OAuthBearer,
        credentials: SaslCredentials::OAuthBearer(OAuthLogin::Unsecured(UnsecuredLogin {
            principal_claim_name: "sub".into(),
            lifetime_seconds: 3600,
            claims: vec![("sub".into(), ClaimValue::String(sub.into()))],
            extensions: Vec::new(),
        })),
    }
}

#[test]
fn sasl_plaintext_with_plain_and_unsecured_oauthbearer() {
    let tb = Testbed::get();
    let addr = tb.var("STRAIT_SOURCE_SASL_PLAINTEXT_BOOTSTRAP");
    on_each_backend(|backend| async move {
        let plain =
            SaslConfig::password(SaslMechanism::Plain, tb.user(), Secret::new(tb.password()));
        connect_and_describe(
            addr,
            sasl(SecurityProtocol::SaslPlaintext, None, plain),
            backend,
        )
        .await
        .unwrap_or_else(|e| panic!("PLAIN: {e}"));
        connect_and_describe(
            addr,
            sasl(SecurityProtocol::SaslPlaintext, None, unsecured(tb.user())),
            backend,
        )
        .await
        .unwrap_or_else(|e| panic!("OAUTHBEARER: {e}"));
    });
}

fn client_credentials(url: &str) -> SaslConfig {
    SaslConfig {
        mechanism: SaslMechanism::OAuthBearer,
        credentials: SaslCredentials::OAuthBearer(OAuthLogin::ClientCredentials(Box::new(
            ClientCredentials {
                token_endpoint_url: url.to_string(),
                client_id: "strait".into(),
                client_secret: Secret::new("oauth-client-secret-XYZ"),
                scope: Some("kafka".into()),
                extensions: Vec::new(),
                urlencode_header: false,
                sub_claim_name: "sub".into(),
                tls: TlsConfig::default(),
                connect_timeout_ms: 2_000,
                read_timeout_ms: 2_000,
                retry_backoff_ms: 50,
                retry_backoff_max_ms: 1_000,
                refresh: TokenRefresh::default(),
            },
        ))),
    }
}

#[test]
fn oauthbearer_client_credentials_on_sasl_plaintext_and_sasl_ssl() {
    let tb = Testbed::get();
    let endpoint = token_endpoint("svc-mirror", None);
    let plaintext = tb.var("STRAIT_SOURCE_SASL_PLAINTEXT_BOOTSTRAP");
    let over_tls = tb.var("STRAIT_SOURCE_OAUTH_SASL_SSL_BOOTSTRAP");
    let url = endpoint.url.clone();
    on_each_backend(|backend| {
        let url = url.clone();
        async move {
            let creds = client_credentials(&url);
            connect_and_describe(
                plaintext,
                sasl(SecurityProtocol::SaslPlaintext, None, creds.clone()),
                backend,
            )
            .await
            .unwrap_or_else(|e| panic!("SASL_PLAINTEXT: {e}"));
            connect_and_describe(
                over_tls,
                sasl(
                    SecurityProtocol::SaslSsl,
                    Some(tls_to_testbed_ca(tb)),
                    creds,
                ),
                backend,
            )
            .await
            .unwrap_or_else(|e| panic!("SASL_SSL: {e}"));
        }
    });
    // Four connections (two per backend), one token.
    assert_eq!(endpoint.requests.lock().unwrap().len(), 1);
}

#[test]
fn a_token_the_broker_refuses_is_a_clear_error() {
    let tb = Testbed::get();
    let addr = tb.var("STRAIT_SOURCE_SASL_PLAINTEXT_BOOTSTRAP");
    // A signed-looking JWT: the unsecured validator accepts only `alg: none`.
    let endpoint = token_endpoint(
        "svc-mirror",
        Some("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzdmMiLCJleHAiOjQxMDI0NDQ4MDB9.c2ln"),
    );
    let url = endpoint.url.clone();
    on_each_backend(|backend| {
        let url = url.clone();
        async move {
            let err = connect_and_describe(
                addr,
                sasl(
                    SecurityProtocol::SaslPlaintext,
                    None,
                    client_credentials(&url),
                ),
                backend,
            )
            .await
            .expect_err("the broker must refuse the token");
            let text = err.to_string();
            assert!(matches!(err, WireError::Authentication { .. }), "{text}");
            assert!(
                text.contains(addr) && text.contains("OAUTHBEARER"),
                "{text}"
            );
            assert!(
                !text.contains("oauth-client-secret-XYZ") && !text.contains("c2ln"),
                "{text}"
            );
        }
    });
}
