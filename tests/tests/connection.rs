//! The connection layer against real brokers: every listener and SASL mechanism, both IO
//! drivers, and the failure modes operators hit first (wrong password, untrusted CA).

use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest};
use strait_dataplane::io::BrokerConn;
use strait_dataplane::wire::{SaslConfig, SaslMechanism, Secret, TrustStore, WireError};
use strait_tests::{Testbed, on_each_backend, setup};

const MECHANISMS: [SaslMechanism; 3] = [
    SaslMechanism::Plain,
    SaslMechanism::ScramSha256,
    SaslMechanism::ScramSha512,
];

#[test]
fn api_versions_on_every_listener_and_mechanism() {
    let tb = Testbed::get();
    on_each_backend(|backend| async move {
        let mut cases = vec![
            (tb.source().to_string(), tb.plaintext()),
            (tb.target().to_string(), tb.plaintext()),
        ];
        for m in MECHANISMS {
            cases.push((tb.source_sasl_ssl().to_string(), tb.sasl_ssl(m)));
            cases.push((tb.target_sasl_ssl().to_string(), tb.sasl_ssl(m)));
        }
        for (addr, cfg) in cases {
            let label = format!("{addr} {:?}", cfg.sasl.as_ref().map(|s| s.mechanism));
            let conn = BrokerConn::connect(&addr, &setup(cfg, backend))
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            // Kafka 4.1 speaks Produce and Fetch far beyond our caps.
            assert_eq!(conn.version_for::<ProduceRequest>().unwrap(), 12, "{label}");
            assert_eq!(conn.version_for::<FetchRequest>().unwrap(), 12, "{label}");
            let fetch = conn.versions().broker_range(ApiKey::Fetch as i16).unwrap();
            assert!(fetch.max >= 12, "{label}: {fetch}");
        }
    });
}

#[test]
fn wrong_password_is_a_clear_authentication_error() {
    let tb = Testbed::get();
    on_each_backend(|backend| async move {
        for m in MECHANISMS {
            let mut cfg = tb.sasl_ssl(m);
            cfg.sasl = Some(SaslConfig::password(
                m,
                tb.user(),
                Secret::new("not-the-password"),
            ));
            let err = BrokerConn::connect(tb.source_sasl_ssl(), &setup(cfg, backend))
                .await
                .expect_err("a wrong password must not authenticate");
            let text = err.to_string();
            assert!(
                matches!(err, WireError::Authentication { .. }),
                "{m:?}: expected an authentication error, got {text}"
            );
            assert!(text.contains(tb.source_sasl_ssl()), "{text}");
            assert!(text.contains(m.name()), "{text}");
            assert!(
                !text.contains("not-the-password"),
                "the password leaked: {text}"
            );
        }
    });
}

#[test]
fn untrusted_certificate_is_a_clear_tls_error() {
    let tb = Testbed::get();
    on_each_backend(|backend| async move {
        let mut cfg = tb.sasl_ssl(SaslMechanism::ScramSha512);
        cfg.tls.as_mut().unwrap().truststore = TrustStore::PemFile(tb.other_ca_pem());
        let err = BrokerConn::connect(tb.target_sasl_ssl(), &setup(cfg, backend))
            .await
            .expect_err("a certificate from an untrusted CA must be refused");
        let text = err.to_string();
        assert!(
            matches!(err, WireError::Tls { .. }),
            "expected a TLS error, got {text}"
        );
        assert!(text.contains("truststore"), "{text}");
        assert!(text.contains(tb.target_sasl_ssl()), "{text}");
    });
}

#[test]
fn java_truststore_formats() {
    let tb = Testbed::get();
    let password = Some(Secret::new(tb.var("STRAIT_TLS_TRUSTSTORE_PASSWORD")));
    let stores = [
        TrustStore::Pkcs12 {
            path: tb.var("STRAIT_TLS_TRUSTSTORE_P12").into(),
            password: password.clone(),
        },
        TrustStore::Jks {
            path: tb.var("STRAIT_TLS_TRUSTSTORE_JKS").into(),
            password: password.clone(),
        },
    ];
    on_each_backend(|backend| {
        let stores = stores.clone();
        async move {
            for ts in stores {
                let mut cfg = tb.sasl_ssl(SaslMechanism::ScramSha256);
                cfg.tls.as_mut().unwrap().truststore = ts.clone();
                BrokerConn::connect(tb.source_sasl_ssl(), &setup(cfg, backend))
                    .await
                    .unwrap_or_else(|e| panic!("{ts:?}: {e}"));
            }
        }
    });
}

#[test]
fn plaintext_client_on_tls_listener_is_explained() {
    let tb = Testbed::get();
    on_each_backend(|backend| async move {
        let err = BrokerConn::connect(tb.source_sasl_ssl(), &setup(tb.plaintext(), backend))
            .await
            .expect_err("PLAINTEXT against SASL_SSL cannot work");
        assert!(err.to_string().contains("security.protocol"), "{err}");
    });
}
