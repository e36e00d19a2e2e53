//! What `strait run` writes to stderr when stderr is a file: no colour codes, and with
//! `--log-format json` one JSON object per line; and the hints it gives when a listener speaks
//! another security protocol than the configuration (only then: a broker that shuts down
//! normally gets no such hint, tests/tests/faults.rs `rolling_restart`).
#![forbid(unsafe_code)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use strait_tests::log::create_topic;
use strait_tests::strait::Strait;
use strait_tests::{Testbed, testbed_mm2_config, unique};

/// Runs `strait [pre_args] run --config CFG --until-caught-up` with stderr in a file, without
/// `NO_COLOR` (the point is what strait does by itself), and returns stderr.
fn run_to_file(pre_args: &[&str], extra_env: &[(&str, &str)]) -> String {
    let tb = Testbed::get();
    let topic = unique("logs");
    create_topic(tb.source(), &topic, 1, &[]);
    let cfg = testbed_mm2_config(&topic, "strait.api.listen = 127.0.0.1:0");
    let stderr_path = tempfile::NamedTempFile::new()
        .expect("temp file")
        .into_temp_path();
    let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strait"));
    cmd.args(pre_args)
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .arg("--until-caught-up")
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let status = cmd.status().expect("strait runs");
    let text = std::fs::read_to_string(&stderr_path).expect("stderr readable");
    assert!(status.success(), "strait failed: {status:?}\n{text}");
    text
}

#[test]
fn a_log_file_gets_no_colour_codes() {
    let text = run_to_file(&[], &[]);
    assert!(
        text.lines().count() >= 3,
        "expected several log lines:\n{text}"
    );
    assert!(
        !text.contains('\u{1b}'),
        "ANSI escape sequences in a file:\n{text:?}"
    );
}

#[test]
fn json_logs_are_one_object_per_line() {
    let text = run_to_file(&["--log-format", "json"], &[]);
    let mut events = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}\nstderr:\n{text}"));
        assert!(
            v.get("level").is_some() && v.get("fields").is_some(),
            "{line}"
        );
        events += 1;
    }
    assert!(events >= 3, "expected several events:\n{text}");
    // The closing summary is an event too, with its numbers as fields.
    assert!(
        text.lines()
            .any(|l| l.contains("\"run finished\"") && l.contains("\"partitions\":1")),
        "no `run finished` event:\n{text}"
    );
}

/// Starts `strait run` with cluster A at `source_bootstrap` (the last value of a key wins) and
/// `extra` lines, waits until its stderr says `expected` (at most 60 s), stops it and returns
/// stderr.
fn run_until_logged(source_bootstrap: &str, extra: &str, expected: &str) -> String {
    let tb = Testbed::get();
    let topic = unique("hint");
    create_topic(tb.source(), &topic, 1, &[]);
    let cfg = testbed_mm2_config(
        &topic,
        &format!("A.bootstrap.servers = {source_bootstrap}\n{extra}"),
    );
    let strait = Strait::start(Path::new(env!("CARGO_BIN_EXE_strait")), &cfg, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !strait.stderr().contains(expected) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    strait.signal("KILL");
    let exit = strait.wait(Duration::from_secs(30));
    assert!(
        exit.stderr.contains(expected),
        "no `{expected}` within 60 s:\n{}",
        exit.stderr
    );
    exit.stderr
}

#[test]
fn plaintext_at_a_sasl_listener_gets_the_sasl_hint() {
    let tb = Testbed::get();
    let text = run_until_logged(
        tb.var("STRAIT_SOURCE_SASL_PLAINTEXT_BOOTSTRAP"),
        "",
        "does the listener expect SASL? check security.protocol",
    );
    assert!(
        text.contains("at the first request of a new connection"),
        "{text}"
    );
}

#[test]
fn sasl_at_a_plaintext_listener_is_told_so_at_the_handshake() {
    let tb = Testbed::get();
    let text = run_until_logged(
        tb.source(),
        &format!(
            "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = PLAIN\n\
             A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"{}\" password=\"{}\";\n",
            tb.user(),
            tb.password()
        ),
        "the broker is not expecting SASL here (is this a SASL listener?)",
    );
    // The other hint belongs to plaintext clients only.
    assert!(!text.contains("does the listener expect SASL"), "{text}");
    // The password is never logged.
    assert!(!text.contains(tb.password()), "{text}");
}
