//! Kafka's own sample file, `config/connect-mirror-maker.properties` as Kafka 4 ships it (kept
//! unchanged in `config_corpus/mm2-sample.properties`), runs against the single-broker test bed
//! with only its bootstrap servers replaced: it sets every internal topic's replication factor to
//! 1, strait's progress topic through MM2's `offset.storage.replication.factor`.
//!
//! The file replicates every topic both ways under the aliases A and B, so this test is a binary
//! of its own: cargo runs test binaries one after another, so no other test's flows run while it
//! copies.
#![forbid(unsafe_code)]

use std::path::Path;
use std::time::Duration;

use strait_tests::api::{eventually, produce_round_robin};
use strait_tests::log::{create_topic, try_offsets};
use strait_tests::strait::Strait;
use strait_tests::{Testbed, kafka_tool, kafka_tool_ok, repo_root, temp_file, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// The sample file with the test bed's addresses as A's and B's bootstrap servers; every other
/// line as Kafka ships it.
fn sample_on_the_testbed() -> String {
    let tb = Testbed::get();
    let path = repo_root().join("control/tests/config_corpus/mm2-sample.properties");
    let text = std::fs::read_to_string(&path).expect("the sample file");
    let mut replaced = 0;
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("A.bootstrap.servers") {
                replaced += 1;
                format!("A.bootstrap.servers = {}", tb.source())
            } else if l.starts_with("B.bootstrap.servers") {
                replaced += 1;
                format!("B.bootstrap.servers = {}", tb.target())
            } else {
                l.to_string()
            }
        })
        .collect();
    assert_eq!(replaced, 2, "the sample's bootstrap lines moved");
    out.join("\n") + "\n"
}

/// Deletes strait's progress topic of `source_alias` on `bootstrap` and waits until it is gone,
/// so that the run has to create it (with the replication factor under test).
fn delete_progress_topic(bootstrap: &str, source_alias: &str) {
    let topic = format!("strait-progress.{source_alias}.internal");
    let _ = kafka_tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            bootstrap,
            "--delete",
            "--if-exists",
            "--topic",
            &topic,
        ],
        None,
    );
    eventually(60, &format!("{topic} deleted"), || {
        let list = kafka_tool_ok(
            "kafka-topics",
            &["--bootstrap-server", bootstrap, "--list"],
            None,
        );
        (!list.lines().any(|l| l.trim() == topic)).then_some(())
    });
}

#[test]
fn kafkas_sample_file_runs_on_single_broker_clusters() {
    let tb = Testbed::get();
    delete_progress_topic(tb.target(), "A");
    delete_progress_topic(tb.source(), "B");
    let topic = unique("sample");
    create_topic(tb.source(), &topic, 1, &[]);
    produce_round_robin(&topic, "sample-", 5);

    let cfg = temp_file(&sample_on_the_testbed());
    let check = std::process::Command::new(STRAIT)
        .args(["check", "--config"])
        .arg(&cfg)
        .output()
        .expect("strait check runs");
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{report}");
    assert!(
        report.contains(
            "strait.progress.topic.replication.factor = 1 (offset.storage.replication.factor, line 52)"
        ),
        "strait check does not say where the progress topic's replication factor comes from:\n{report}"
    );

    let mut strait = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let remote = format!("A.{topic}");
    eventually(180, &format!("5 records in {remote} on the target"), || {
        assert!(!strait.has_exited(), "strait stopped:\n{}", strait.stderr());
        let n: i64 = try_offsets(tb.target(), &remote)?
            .iter()
            .map(|(lo, hi)| hi - lo)
            .sum();
        (n == 5).then_some(())
    });
    // Both progress topics were created, each with one replica.
    for (bootstrap, alias) in [(tb.target(), "A"), (tb.source(), "B")] {
        let topic = format!("strait-progress.{alias}.internal");
        let described = eventually(60, &format!("{topic} created"), || {
            let out = kafka_tool(
                "kafka-topics",
                &[
                    "--bootstrap-server",
                    bootstrap,
                    "--describe",
                    "--topic",
                    &topic,
                ],
                None,
            );
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        });
        assert!(described.contains("ReplicationFactor: 1"), "{described}");
    }
    strait.signal("TERM");
    let exit = strait.wait(Duration::from_secs(60));
    assert!(
        !exit.stderr.contains("InvalidReplicationFactor"),
        "{}",
        exit.stderr
    );
    // The file replicates every topic of the shared bed, including ones other tests broke on
    // purpose (a batch with a bad CRC): strait stops those partitions and exits 2. That is its
    // documented answer; this test only requires that none of them is its own topic.
    let stopped: Vec<&str> = exit
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("strait: partition "))
        .filter_map(|l| l.split_once(" stopped:").map(|(p, _)| p))
        .collect();
    match exit.code {
        Some(0) => assert!(stopped.is_empty(), "{}", exit.stderr),
        Some(2) => {
            assert!(
                !stopped.is_empty(),
                "exit 2 without a stopped partition:\n{}",
                exit.stderr
            );
            assert!(
                stopped.iter().all(|p| !p.starts_with(&format!("{topic}-"))),
                "the sample's own topic stopped: {stopped:?}\n{}",
                exit.stderr
            );
        }
        other => panic!("strait exited with {other:?}:\n{}", exit.stderr),
    }
}
