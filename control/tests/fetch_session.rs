//! Fetch sessions (KIP-227) against the real test bed, through the `strait` binary: once a copy
//! has caught up, its fetches are incremental (they name only what changed, and the idle broker
//! answers with almost nothing), and records written afterwards to the idle partitions with
//! Kafka's console producer are still copied exactly.
#![forbid(unsafe_code)]

use std::path::Path;
use std::time::Duration;

use strait_tests::api::{api_addr, call, eventually, produce_round_robin};
use strait_tests::log::{assert_same_records, create_topic, read_records, try_offsets};
use strait_tests::strait::Strait;
use strait_tests::{Testbed, testbed_mm2_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");
const PARTITIONS: i32 = 6;

/// The shards' counter `name` in `/status`, summed.
fn shard_counter(addr: &str, name: &str) -> u64 {
    let (_, v) = call(addr, "GET", "/status", None, "");
    v["shards"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s[name].as_u64())
        .sum()
}

/// The records `remote` holds on the target, over every partition (0 before it exists).
fn target_records(remote: &str) -> i64 {
    try_offsets(Testbed::get().target(), remote)
        .unwrap_or_default()
        .iter()
        .map(|(start, end)| end - start)
        .sum()
}

#[test]
fn an_idle_copy_fetches_incrementally_and_copies_what_comes_later_exactly() {
    let tb = Testbed::get();
    let topic = unique("fsession");
    let remote = format!("A.{topic}");
    create_topic(tb.source(), &topic, PARTITIONS, &[]);
    produce_round_robin(&topic, "first-", 60);
    let cfg = testbed_mm2_config(
        &topic,
        "strait.api.listen = 127.0.0.1:0\nA->B.heartbeats.replication.enabled = false",
    );
    let strait = Strait::start(Path::new(STRAIT), &cfg, &["--shards", "1"]);
    let addr = api_addr(&strait);
    eventually(90, "the first 60 records copied", || {
        (target_records(&remote) == 60).then_some(())
    });

    // Caught up and idle: the broker holds each partition for max_wait_ms, and the fetches go on
    // in the session, naming nothing.
    let before = shard_counter(&addr, "incremental_fetches");
    std::thread::sleep(Duration::from_secs(4));
    let idle = shard_counter(&addr, "incremental_fetches") - before;
    assert!(
        idle >= 3,
        "{idle} incremental fetches in 4 idle seconds (fetch_max_wait 500 ms)"
    );

    // Records into the idle partitions: the session answers them.
    produce_round_robin(&topic, "later-", 30);
    eventually(60, "all 90 records copied", || {
        (target_records(&remote) == 90).then_some(())
    });
    let full = shard_counter(&addr, "full_fetches");
    let incremental = shard_counter(&addr, "incremental_fetches");
    let resets = shard_counter(&addr, "fetch_session_resets");
    strait.signal("TERM");
    strait.wait(Duration::from_secs(60)).expect_code(0);
    eprintln!("{full} full fetches, {incremental} incremental, {resets} session resets");
    assert!(
        incremental > full,
        "{incremental} incremental fetches, {full} full"
    );
    for p in 0..PARTITIONS {
        let src = read_records(tb.source(), &topic, p);
        let dst = read_records(tb.target(), &remote, p);
        assert_eq!(src.len(), 15, "{topic}-{p}: round-robin wrote 15 records");
        assert_same_records(&format!("{topic}-{p}"), &src, &dst);
    }
}
