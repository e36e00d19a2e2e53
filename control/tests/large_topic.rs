//! `strait run --until-caught-up` on a topic larger than one creation request: its remote topic
//! is created with [`PARTITIONS_PER_REQUEST`] partitions and then grown, so the target's
//! metadata may show the last partition only after the first discovery pass, which then leaves
//! it for the next pass. The run must not exit 0 before that partition too was started and
//! copied (it did: it checked only the partitions already started).
//!
//! A test binary of its own, with one test: some 10 000 partitions on a single-broker test bed
//! load the brokers enough to make the produce of tests running beside it fail (cargo runs
//! test binaries one after another).
#![forbid(unsafe_code)]

use std::time::Duration;

use strait_control::duties::topics::PARTITIONS_PER_REQUEST;
use strait_tests::log::{create_topic, offsets, try_offsets};
use strait_tests::strait::run_strait;
use strait_tests::{Testbed, kafka_tool, kafka_tool_ok, own_flow_config, temp_file, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// One more than a creation request makes: the last partition comes with the growth step.
const PARTITIONS: i32 = PARTITIONS_PER_REQUEST + 1;

/// The source and remote topics, deleted when the test ends, passed or not: a broker holds at
/// most one such topic's files at a time (some 20 000 open files is its limit).
struct Topics(Vec<(&'static str, String)>);

impl Drop for Topics {
    fn drop(&mut self) {
        for (addr, topic) in &self.0 {
            let _ = kafka_tool(
                "kafka-topics",
                &["--bootstrap-server", addr, "--delete", "--topic", topic],
                None,
            );
        }
    }
}

/// Records in every partition, with Kafka's perf producer: round robin, several rounds (its
/// round-robin partitioner skips a partition now and then when a batch is started).
fn produce(topic: &str, records: i32) {
    let tb = Testbed::get();
    kafka_tool_ok(
        "kafka-producer-perf-test",
        &[
            "--topic",
            topic,
            "--num-records",
            &records.to_string(),
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={}", tb.source()),
            "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
            "linger.ms=0",
        ],
        None,
    );
}

#[test]
fn until_caught_up_waits_for_the_partition_of_the_growth_step() {
    let tb = Testbed::get();
    let topic = unique("large");
    // The target broker shows the last partition only once it created the 5 000 logs before it
    // (a minute on a loaded bed), about when strait copied those. The next discovery pass, two
    // minutes on, starts it: a run that exits 0 before then left it uncopied and fails below.
    // A long group session, so that no lapse (a rebalance runs a discovery pass) comes between.
    let (cfg, _flow, remote) = own_flow_config(
        &topic,
        "refresh.topics.interval.seconds = 120\nstrait.group.session.timeout.ms = 60000\n",
    );
    let _cleanup = Topics(vec![
        (tb.source(), topic.clone()),
        (tb.target(), remote.clone()),
    ]);
    create_topic(tb.source(), &topic, PARTITIONS, &[]);
    produce(&topic, 4 * PARTITIONS);
    let source = offsets(tb.source(), &topic);
    let last = source.len() - 1;
    assert!(
        source[last].1 > 0,
        "the last partition must have records to copy: {:?}",
        source[last]
    );
    let empty = source.iter().filter(|(_, hi)| *hi == 0).count();
    assert!(empty < 50, "{empty} source partitions have no records");

    let exit = run_strait(
        STRAIT.as_ref(),
        &cfg,
        &["--until-caught-up"],
        Duration::from_secs(600),
    );
    exit.expect_code(0);
    // Kept for a failure's diagnosis.
    let log = temp_file(&exit.stderr);
    println!(
        "strait exited 0 after {:?}; its log: {}",
        exit.elapsed,
        log.display()
    );

    let target = try_offsets(tb.target(), &remote).unwrap_or_else(|| {
        panic!(
            "no offsets of the remote topic {remote}; log {}",
            log.display()
        )
    });
    assert_eq!(target.len(), source.len(), "remote partitions");
    // At least every record: on a loaded bed the group's heartbeats can miss its session
    // while the target broker creates 5 001 logs, and a partition handed over after a lapse
    // copies again from its last stored progress (at least once).
    let behind: Vec<(usize, i64, i64)> = source
        .iter()
        .zip(&target)
        .enumerate()
        .filter(|(_, (s, t))| t.1 < s.1)
        .map(|(p, (s, t))| (p, s.1, t.1))
        .collect();
    assert!(
        behind.is_empty(),
        "{} partitions not copied when strait exited 0 (partition, source end, target end; \
         first ten): {:?}; the last partition is {last}; log {}",
        behind.len(),
        &behind[..behind.len().min(10)],
        log.display()
    );
}
