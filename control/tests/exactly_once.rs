//! Exactly-once forwarding (`<target>.exactly.once.source.support = enabled`) through the
//! `strait` binary against the real test bed: SIGKILLed over and over while Kafka's verifiable
//! producer writes, and restarted each time, strait leaves the target with every source record
//! exactly once, in order per partition, as Kafka's own read_committed console consumer reads
//! it.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use strait_tests::log::create_topic;
use strait_tests::strait::{Strait, run_strait};
use strait_tests::{Testbed, kafka_tool_ok, own_flow_config, unique, verifiable_producer};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// How many times strait is SIGKILLed while it copies.
const KILLS: usize = 20;

/// A small deterministic generator (the seed is printed, so a failure replays).
struct Rng(u64);

impl Rng {
    fn below_ms(&mut self, max_ms: u64) -> Duration {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        Duration::from_millis((self.0 >> 33) % max_ms)
    }
}

/// Every value of `topic` on the target by partition, as Kafka's console consumer reads it
/// under read_committed.
fn committed_values(topic: &str, expected: u64) -> BTreeMap<i32, Vec<u64>> {
    let out = kafka_tool_ok(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            Testbed::get().target(),
            "--topic",
            topic,
            "--from-beginning",
            "--isolation-level",
            "read_committed",
            // One more than expected: a duplicate must be able to show.
            "--max-messages",
            &(expected + 1).to_string(),
            "--timeout-ms",
            "15000",
            "--property",
            "print.partition=true",
        ],
        None,
    );
    let mut by_partition: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let (p, v) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("unexpected console-consumer line {line:?}"));
        let p: i32 = p
            .strip_prefix("Partition:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected console-consumer line {line:?}"));
        let v: u64 = v
            .parse()
            .unwrap_or_else(|_| panic!("unexpected value in {line:?}"));
        by_partition.entry(p).or_default().push(v);
    }
    by_partition
}

/// Waits until strait's log says it took its partitions over (it copies from then on).
fn wait_taken_over(s: &Strait, partitions: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = s.stderr();
        if log.matches("exactly-once: partition taken over").count() >= partitions {
            return;
        }
        if Instant::now() >= deadline {
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(60)..].join("\n");
            panic!("strait took no partition over within 60 s; the end of its log:\n{tail}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigkilled_over_and_over_it_leaves_every_record_exactly_once() {
    let topic = unique("eos-kill");
    let partitions = 3;
    create_topic(Testbed::get().source(), &topic, partitions, &[]);
    // A member restarted with the same static id takes its partitions back at once.
    let (cfg, flow, remote) = own_flow_config(
        &topic,
        "strait.group.instance.id = eos-kill\n\
         strait.group.session.timeout.ms = 6000\n\
         strait.group.heartbeat.interval.ms = 1000\n",
    );
    let target_alias = flow.split("->").nth(1).expect("a flow name");
    let cfg_text = std::fs::read_to_string(&cfg).unwrap()
        + &format!("{target_alias}.exactly.once.source.support = enabled\n");
    std::fs::write(&cfg, cfg_text).unwrap();

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("seed {seed}");
    let mut rng = Rng(seed);
    let records: u64 = 60_000;
    // About 40 s of production at 1 500 records/s: the kills happen while it writes.
    let mut producer = verifiable_producer(Testbed::get().source(), &topic, records, 1_500);
    for kill in 0..KILLS {
        let s = Strait::start(Path::new(STRAIT), &cfg, &[]);
        wait_taken_over(&s, partitions as usize);
        // At a random moment of the copy: between commits, mid-commit, right after one.
        std::thread::sleep(rng.below_ms(2_500));
        s.signal("KILL");
        let exit = s.wait(Duration::from_secs(10));
        assert_eq!(exit.code, None, "kill {kill}: killed by the signal");
    }
    let status = producer.wait().expect("the producer runs");
    assert!(status.success(), "kafka-verifiable-producer failed");
    run_strait(
        Path::new(STRAIT),
        &cfg,
        &["--until-caught-up"],
        Duration::from_secs(120),
    )
    .expect_code(0);

    let seen = committed_values(&remote, records);
    let total: usize = seen.values().map(Vec::len).sum();
    let mut all: Vec<u64> = seen.values().flatten().copied().collect();
    all.sort_unstable();
    all.dedup();
    let duplicated = total - all.len();
    let lost = records as usize - all.len();
    let out_of_order: usize = seen
        .values()
        .map(|v| v.windows(2).filter(|w| w[1] <= w[0]).count())
        .sum();
    assert_eq!(
        (lost, duplicated, out_of_order),
        (0, 0, 0),
        "seed {seed}: {records} produced; read_committed saw {total} ({lost} lost, {duplicated} duplicated, {out_of_order} out of order)"
    );
    assert_eq!(all.last().copied(), Some(records - 1));
}
