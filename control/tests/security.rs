//! Client security from `mm2.properties`, through every client strait runs: the replication
//! consumer and producer, admins, offset-syncs clients, checkpoint clients, heartbeats, and the
//! flow plans the migrate and translate commands build on; and no secret in `strait check`'s
//! output, its errors, or Debug output.

use std::path::{Path, PathBuf};
use std::process::Command;

use strait_control::config::model::ClientConfig;
use strait_control::config::{self, Mm2Config};
use strait_dataplane::wire::{
    ConnConfig, KeyStore, OAuthLogin, SaslCredentials, SaslMechanism, SecurityProtocol, TrustStore,
};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// Every secret the config below holds; none may ever be printed.
const SECRETS: &[&str] = &[
    "ts-secret-A1",
    "ks-secret-A2",
    "key-secret-A3",
    "oauth-secret-A4",
    "ts-secret-B1",
    "key-secret-B2",
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../dataplane/tests/fixtures/tls")
        .join(name)
}

/// The inline PEM key of the fixtures, as one properties line, and a piece of its base64.
fn inline_key() -> (String, String) {
    let text = std::fs::read_to_string(fixture("client.enc-pbes2.pem")).unwrap();
    let key = &text[..text.find("-----BEGIN CERTIFICATE-----").unwrap()];
    let body_line = key.lines().nth(3).unwrap().to_string();
    (
        key.split_whitespace().collect::<Vec<_>>().join(" "),
        body_line,
    )
}

fn config_text() -> String {
    let (key, _) = inline_key();
    let chain = std::fs::read_to_string(fixture("client.pem")).unwrap();
    let chain = &chain[chain.find("-----BEGIN CERTIFICATE-----").unwrap()..];
    let chain = chain.split_whitespace().collect::<Vec<_>>().join(" ");
    format!(
        "clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
B->A.enabled = true
replication.factor = 1
offset-syncs.topic.replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
config.storage.replication.factor = 1
strait.progress.topic.replication.factor = 1

A.security.protocol = SASL_SSL
A.ssl.truststore.location = /etc/a/truststore.jks
A.ssl.truststore.password = ts-secret-A1
A.ssl.keystore.location = /etc/a/keystore.jks
A.ssl.keystore.password = ks-secret-A2
A.ssl.key.password = key-secret-A3
A.ssl.endpoint.identification.algorithm =
A.sasl.mechanism = OAUTHBEARER
A.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler
A.sasl.oauthbearer.token.endpoint.url = https://idp.example/oauth2/token
A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"mirror\" clientSecret=\"oauth-secret-A4\" scope=\"kafka\";

B.security.protocol = SSL
B.ssl.truststore.type = PKCS12
B.ssl.truststore.location = /etc/b/truststore.p12
B.ssl.truststore.password = ts-secret-B1
B.ssl.keystore.type = PEM
B.ssl.keystore.key = {key}
B.ssl.keystore.certificate.chain = {chain}
B.ssl.key.password = key-secret-B2
"
    )
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("mm2.properties");
    std::fs::write(&path, text).unwrap();
    path
}

fn load(text: &str) -> Mm2Config {
    let dir = tempfile::tempdir().unwrap();
    config::load(&write_config(dir.path(), text)).unwrap_or_else(|e| panic!("{e}"))
}

/// Asserts that `conn` carries cluster `alias`'s security settings.
fn assert_cluster_security(alias: &str, who: &str, conn: &ConnConfig) {
    let tls = conn.tls.as_ref().unwrap_or_else(|| panic!("{who}: no TLS"));
    match alias {
        "A" => {
            assert_eq!(conn.security_protocol, SecurityProtocol::SaslSsl, "{who}");
            assert!(
                matches!(&tls.truststore, TrustStore::Jks { path, password: Some(p) }
                    if path == Path::new("/etc/a/truststore.jks") && p.expose() == "ts-secret-A1"),
                "{who}: {tls:?}"
            );
            assert!(
                matches!(&tls.keystore, Some(KeyStore::Jks { password: Some(p), key_password: Some(k), .. })
                    if p.expose() == "ks-secret-A2" && k.expose() == "key-secret-A3"),
                "{who}: {tls:?}"
            );
            assert!(!tls.verify_hostname, "{who}");
            let sasl = conn
                .sasl
                .as_ref()
                .unwrap_or_else(|| panic!("{who}: no SASL"));
            assert_eq!(sasl.mechanism, SaslMechanism::OAuthBearer, "{who}");
            match &sasl.credentials {
                SaslCredentials::OAuthBearer(OAuthLogin::ClientCredentials(c)) => {
                    assert_eq!(c.token_endpoint_url, "https://idp.example/oauth2/token");
                    assert_eq!(c.client_id, "mirror");
                    assert_eq!(c.client_secret.expose(), "oauth-secret-A4");
                }
                other => panic!("{who}: {other:?}"),
            }
        }
        "B" => {
            assert_eq!(conn.security_protocol, SecurityProtocol::Ssl, "{who}");
            assert!(
                matches!(&tls.truststore, TrustStore::Pkcs12 { password: Some(p), .. } if p.expose() == "ts-secret-B1"),
                "{who}: {tls:?}"
            );
            assert!(
                matches!(&tls.keystore, Some(KeyStore::PemInline { key_password: Some(k), .. }) if k.expose() == "key-secret-B2"),
                "{who}: {tls:?}"
            );
            assert!(tls.verify_hostname, "{who}");
            assert!(conn.sasl.is_none(), "{who}");
        }
        other => panic!("unknown cluster {other}"),
    }
}

#[test]
fn every_client_gets_its_clusters_security() {
    let cfg = load(&config_text());
    assert_eq!(cfg.flows.len(), 2);
    let mut walked = 0;
    for flow in &cfg.flows {
        let c = &flow.clients;
        let clients: [(&str, &ClientConfig); 8] = [
            ("source consumer", &c.source_consumer.client),
            ("source admin", &c.source_admin.client),
            ("target producer", &c.target_producer.client),
            ("target admin", &c.target_admin.client),
            ("target consumer", &c.target_consumer.client),
            ("offset-syncs producer", &c.offset_syncs_producer.client),
            ("offset-syncs consumer", &c.offset_syncs_consumer.client),
            ("offset-syncs admin", &c.offset_syncs_admin.client),
        ];
        for (role, client) in clients {
            let who = format!("{} {role} @ {}", flow.name(), client.cluster);
            assert_cluster_security(&client.cluster, &who, &client.conn);
            walked += 1;
        }
        // The plan the shards, admins, `strait offsets import-mm2/export-mm2` and the
        // translate runtime are built from.
        let plan = strait_control::plan::flow_plan(&cfg, flow).unwrap();
        for (who, alias, conn) in [
            ("source fetch", &plan.source, &plan.source_fetch),
            ("source admin", &plan.source, &plan.source_admin),
            ("target produce", &plan.target, &plan.target_produce),
            ("target admin", &plan.target, &plan.target_admin),
        ] {
            assert_cluster_security(alias, &format!("{} plan {who}", flow.name()), conn);
            walked += 1;
        }
    }
    let (heartbeats, _) = strait_control::duties::heartbeats::plans(&cfg);
    assert_eq!(heartbeats.len(), 2);
    for hb in &heartbeats {
        assert_cluster_security(&hb.target, "heartbeats", &hb.target_conn);
        walked += 1;
    }
    assert_eq!(walked, 2 * (8 + 4) + 2);
}

fn assert_no_secret(what: &str, text: &str) {
    let (_, key_piece) = inline_key();
    for s in SECRETS.iter().copied().chain([key_piece.as_str()]) {
        assert!(!text.contains(s), "{what} shows the secret {s}:\n{text}");
    }
}

#[test]
fn secrets_never_appear_in_check_output_errors_or_debug() {
    let dir = tempfile::tempdir().unwrap();
    let text = config_text();
    let path = write_config(dir.path(), &text);
    let out = Command::new(STRAIT)
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The check shows what it resolved, redacted.
    assert!(
        stdout.contains("sasl=OAUTHBEARER client_id=mirror"),
        "{stdout}"
    );
    assert!(
        stdout.contains("keystore=JKS /etc/a/keystore.jks"),
        "{stdout}"
    );
    assert!(stdout.contains("[redacted]"), "{stdout}");
    assert_no_secret("strait check", &stdout);
    assert_no_secret(
        "strait check (stderr)",
        &String::from_utf8_lossy(&out.stderr),
    );
    assert_no_secret("Debug of the config", &format!("{:?}", load(&text)));

    // Broken variants: every error message stays clean.
    for (broken, says) in [
        (
            text.replace(
                " scope=\"kafka\"",
                " scope=\"kafka\" extension_auth=\"oauth-secret-A4\"",
            ),
            "extension",
        ),
        (text.replace("clientId=\"mirror\" ", ""), "clientId"),
        (
            text.replace("B.ssl.keystore.type = PEM", "B.ssl.keystore.type = PKCS12"),
            "ssl.keystore.key",
        ),
        (
            text.replace(
                "A.sasl.oauthbearer.token.endpoint.url = https://idp.example/oauth2/token",
                "A.sasl.oauthbearer.token.endpoint.url = https://u:oauth-secret-A4@idp/",
            ),
            "credentials",
        ),
    ] {
        let path = write_config(dir.path(), &broken);
        let out = Command::new(STRAIT)
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{all}");
        assert!(all.contains(says), "expected `{says}`:\n{all}");
        assert_no_secret("strait check of a broken config", &all);
    }
}
