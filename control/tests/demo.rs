//! `scripts/demo.sh`, the README's first command, against the running test bed with the binary
//! under test (so the suite does not build a release binary).
#![forbid(unsafe_code)]

use std::process::Command;

use strait_tests::{Testbed, repo_root};

#[test]
fn the_demo_replicates_and_shows_the_keyed_records_it_wrote() {
    // Fails early, with the usual message, when the test bed is not up.
    Testbed::get();
    let out = Command::new(repo_root().join("scripts/demo.sh"))
        .env("DEMO_STRAIT_BIN", env!("CARGO_BIN_EXE_strait"))
        .env("DEMO_RECORDS", "5000")
        .env("DEMO_PARTITIONS", "2")
        .output()
        .expect("scripts/demo.sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "demo.sh failed: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("OK: the target holds all 5000 records of the source."),
        "stdout:\n{stdout}"
    );
    // The runbook's evidence: the smoke record went through the running strait, and verify
    // compared every copied record of the demo's topics.
    assert!(
        stdout
            .contains("OK: the record reached the target identical, where the stored mapping says"),
        "stdout:\n{stdout}"
    );
    assert!(
        stdout.contains("OK: flow source->target (full), 4 partitions, 5004 records compared, 5004 matched, 0 missing, 0 extra, 0 mismatched"),
        "stdout:\n{stdout}"
    );
    // The sample shows the three keyed records with their headers, as the demo promises.
    let sample: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("the keyed records on the target"))
        .skip(1)
        .take(3)
        .collect();
    assert_eq!(sample.len(), 3, "stdout:\n{stdout}");
    for (i, line) in sample.iter().enumerate() {
        let n = i + 1;
        assert!(
            line.contains("app:demo")
                && line.contains(&format!("key-{n}"))
                && line.contains(&format!("value-{n}")),
            "sample line {n} lacks its header, key or value: {line:?}\nstdout:\n{stdout}"
        );
    }
}
