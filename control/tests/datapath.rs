//! End-to-end tests of the data path through the real `strait run` binary against the test bed,
//! each on both IO drivers (issue 3, "Tests that must exist"):
//!
//! 1. byte-for-byte: every codec, idempotent or not, keys/null keys/null values/headers/explicit
//!    timestamps; records equal and fast-path batches forwarded with their records untouched;
//!    plus a LogAppendTime topic, whose batches are rebuilt keeping the broker's timestamps;
//! 2. transactions: exactly the committed records under read_committed;
//! 3. a compacted source after cleaning: every surviving record exactly once (slow path);
//! 4. restart in the middle of a run (SIGTERM and SIGKILL): nothing missing, no duplicates (crash
//!    recovery skips what the target already holds), duplicates counted and reported
//!    and printed; none after SIGTERM; after SIGKILL exactly the records written past the stored
//!    progress (which is written once a second, so this is *not* bounded by the 5-batch
//!    in-flight window: see the report printed by the test);
//! 5. a broken partition: it stops with a clear error, the others finish.
//!
//! The data is written by Kafka's own Java producer (`tests/java/StraitProduce.java`) and read
//! back with our own Fetch and decoder (`strait_tests::log`), plus the console consumer once.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use strait_control::cluster::TopicPartition;
use strait_dataplane::batch::{Compression, TimestampType};
use strait_tests::log::{
    LogRecord, assert_same_records, create_topic, offsets, read_batches, read_records, read_topic,
    records_of, stored_progress,
};
use strait_tests::strait::{Strait, StraitExit, run_strait};
use strait_tests::{Testbed, kafka_tool_ok, strait_produce, testbed_mm2_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");
/// Longest a `--until-caught-up` run may take before the test fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(90);
/// The broker's deduplication window, and strait's bound on unsettled batches per partition
/// (reported next to the duplicates after SIGKILL).
const IN_FLIGHT_BATCHES: usize = 5;

/// Declares `mod $name { fn uring(); fn epoll(); }` running `$body(io)` on each driver.
macro_rules! on_both_drivers {
    ($name:ident, $body:expr) => {
        mod $name {
            #[test]
            fn uring() {
                // io_uring must work where these tests run: fail, never skip.
                strait_tests::backends();
                ($body)("uring");
            }
            #[test]
            fn epoll() {
                ($body)("epoll");
            }
        }
    };
}

fn strait_bin() -> &'static Path {
    Path::new(STRAIT)
}

/// A config replicating the topics matched by the regex `topics` from A to B, and nothing else:
/// MirrorMaker (and so strait) also replicates every `heartbeats` topic by default, and the
/// shared test bed may have one, which would make the counts depend on other tests.
fn config(topics: &str) -> PathBuf {
    testbed_mm2_config(topics, "A->B.heartbeats.replication.enabled = false")
}

/// `strait run --until-caught-up --io IO` on `config`.
fn run_until_caught_up(config: &Path, io: &str) -> StraitExit {
    let exit = run_strait(
        strait_bin(),
        config,
        &["--until-caught-up", "--io", io, "--shards", "2"],
        RUN_TIMEOUT,
    );
    eprintln!(
        "strait --io {io} ran {:?}, exit {:?}; last lines:\n{}",
        exit.elapsed,
        exit.code,
        tail(&exit.stderr, 6)
    );
    exit
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn remote(topic: &str) -> String {
    format!("A.{topic}")
}

// ---------------------------------------------------------------------------------------------
// 1. Byte-for-byte
// ---------------------------------------------------------------------------------------------

const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];

fn byte_for_byte(io: &str) {
    let tb = Testbed::get();
    let base = unique("dp-bytes");
    let partitions = 3;
    let mut topics = Vec::new();
    for codec in CODECS {
        for idempotent in [true, false] {
            let topic = format!("{base}-{codec}-{idempotent}");
            create_topic(tb.source(), &topic, partitions, &[]);
            topics.push((topic, codec, idempotent));
        }
    }
    // And a LogAppendTime topic: its batches must be rebuilt (a client may not send the
    // LogAppendTime bit), each record keeping the time the source broker gave it.
    let append_time = format!("{base}-logappendtime");
    create_topic(
        tb.source(),
        &append_time,
        partitions,
        &[("message.timestamp.type", "LogAppendTime")],
    );
    let mut specs: Vec<String> = topics
        .iter()
        .map(|(t, c, i)| format!("{t}:{partitions}:{c}:{i}"))
        .collect();
    specs.push(format!("{append_time}:{partitions}:lz4:true"));
    let mut args = vec!["mixed", tb.source(), "450", "1"];
    args.extend(specs.iter().map(String::as_str));
    strait_produce().run(&args, None);

    // batch.size = 0: every batch as it came, even when a backlog of small ones queues up.
    let cfg = testbed_mm2_config(
        &format!("{base}-.*"),
        "A->B.heartbeats.replication.enabled = false\nA->B.producer.override.batch.size = 0",
    );
    let exit = run_until_caught_up(&cfg, io);
    exit.expect_code(0);
    let summary = exit.summary();
    assert_eq!(summary.merged, 0);
    assert_eq!(summary.partitions, 11 * partitions as u64);
    assert_eq!(summary.records, 11 * 450);
    let append_time_batches: Vec<Vec<_>> = (0..partitions)
        .map(|p| read_batches(tb.source(), &append_time, p))
        .collect();
    assert_eq!(
        summary.rebuilt,
        append_time_batches.iter().map(Vec::len).sum::<usize>() as u64,
        "exactly the LogAppendTime batches are rebuilt; dense CreateTime batches from offset 0 all take the fast path"
    );
    for (p, src) in append_time_batches.iter().enumerate() {
        let what = format!("{append_time}-{p} (--io {io})");
        assert!(
            src.iter()
                .all(|b| b.timestamp_type() == TimestampType::LogAppendTime),
            "{what}: the source batches use LogAppendTime"
        );
        let dst = read_batches(tb.target(), &remote(&append_time), p as i32);
        assert!(
            dst.iter()
                .all(|b| b.timestamp_type() == TimestampType::CreateTime
                    && b.compression() == Compression::Lz4),
            "{what}: target batches are CreateTime and keep the codec"
        );
        assert_same_records(&what, &records_of(src), &records_of(&dst));
    }

    let mut multi_record_batches = 0;
    for (topic, codec, idempotent) in &topics {
        for p in 0..partitions {
            let what = format!("{topic}-{p} ({codec}, idempotent={idempotent}, --io {io})");
            let src = read_batches(tb.source(), topic, p);
            let dst = read_batches(tb.target(), &remote(topic), p);
            assert!(!src.is_empty(), "{what}: the source partition is empty");
            assert_eq!(
                src.len(),
                dst.len(),
                "{what}: {} source batches, {} target batches",
                src.len(),
                dst.len()
            );
            for (s, d) in src.iter().zip(&dst) {
                let at = format!("{what}, batch at {}", s.base_offset());
                assert_eq!(s.compression().name(), *codec, "{at}: the producer's codec");
                assert_eq!(d.compression(), s.compression(), "{at}: codec changed");
                assert_eq!(d.base_offset(), s.base_offset(), "{at}: offsets moved");
                assert_eq!(d.records_count(), s.records_count(), "{at}: record count");
                assert_eq!(d.last_offset_delta(), s.last_offset_delta(), "{at}");
                assert_eq!(d.base_timestamp(), s.base_timestamp(), "{at}");
                assert!(
                    !d.is_transactional() && !d.is_control(),
                    "{at}: bad target attributes"
                );
                assert!(
                    d.as_bytes()[61..] == s.as_bytes()[61..],
                    "{at}: the records section (bytes 61..) differs: the batch was not forwarded unmodified"
                );
                if s.records_count() > 1 {
                    multi_record_batches += 1;
                }
            }
            assert_same_records(&what, &records_of(&src), &records_of(&dst));
        }
    }
    assert!(
        multi_record_batches >= topics.len(),
        "the producer made too few multi-record batches ({multi_record_batches}) for the test to mean much"
    );
}

on_both_drivers!(byte_for_byte_every_codec, super::byte_for_byte);

/// With the default `batch.size` (merging on), a partition that keeps up forwards every batch
/// as it came: Kafka's producer writes each batch only once the previous one is on the target
/// (so strait is never behind), and every target batch is the source batch, its records
/// section byte for byte. Compare `a_backlog_of_small_batches_is_copied_in_merged_batches`.
#[test]
fn a_partition_that_keeps_up_forwards_every_batch_as_it_came() {
    let tb = Testbed::get();
    let topic = unique("dp-keepup");
    let partitions = 2;
    create_topic(tb.source(), &topic, partitions, &[]);
    let strait = Strait::start(strait_bin(), &config(&topic), &["--io", "uring"]);
    let out = strait_produce().run(
        &[
            "lockstep",
            tb.source(),
            &topic,
            &partitions.to_string(),
            "30",
            "lz4",
            tb.target(),
            &remote(&topic),
        ],
        None,
    );
    strait.signal("TERM");
    let exit = strait.wait(RUN_TIMEOUT);
    exit.expect_code(0);
    let summary = exit.summary();
    eprintln!("{}; strait: {summary:?}", out.trim());
    assert_eq!(summary.merged, 0, "{}", tail(&exit.stderr, 10));
    let mut batches = 0;
    for p in 0..partitions {
        let what = format!("{topic}-{p}");
        let src = read_batches(tb.source(), &topic, p);
        let dst = read_batches(tb.target(), &remote(&topic), p);
        assert_eq!(
            src.len(),
            15,
            "{what}: the producer wrote one batch per flush"
        );
        assert_eq!(
            src.len(),
            dst.len(),
            "{what}: {} source batches became {} target batches",
            src.len(),
            dst.len()
        );
        for (s, d) in src.iter().zip(&dst) {
            let at = format!("{what}, batch at {}", s.base_offset());
            assert_eq!(d.base_offset(), s.base_offset(), "{at}");
            assert_eq!(d.records_count(), s.records_count(), "{at}");
            assert_eq!(d.compression(), s.compression(), "{at}");
            assert!(
                d.as_bytes()[61..] == s.as_bytes()[61..],
                "{at}: the records section (bytes 61..) differs: the batch was not forwarded as it came"
            );
        }
        assert_same_records(&what, &records_of(&src), &records_of(&dst));
        batches += src.len();
    }
    eprintln!("{batches} source batches, each forwarded as it came");
}

/// A backlog of tiny batches (Kafka's verifiable producer, throttled, writes one or a few records
/// per batch) is copied in merged batches of up to `batch.size`: the same records, timestamps
/// and offsets, in far fewer produce round trips.
#[test]
fn a_backlog_of_small_batches_is_copied_in_merged_batches() {
    let tb = Testbed::get();
    let topic = unique("dp-merge");
    create_topic(tb.source(), &topic, 2, &[]);
    kafka_tool_ok(
        "kafka-verifiable-producer",
        &[
            "--bootstrap-server",
            tb.source(),
            "--topic",
            &topic,
            "--max-messages",
            "2000",
            "--throughput",
            "1000",
            "--acks",
            "-1",
            "--repeating-keys",
            "100",
        ],
        None,
    );
    let exit = run_until_caught_up(&config(&topic), "uring");
    exit.expect_code(0);
    let summary = exit.summary();
    assert_eq!(summary.records, 2000);
    let mut source_batches = 0;
    for p in 0..2 {
        let what = format!("{topic}-{p}");
        let src = read_batches(tb.source(), &topic, p);
        let dst = read_batches(tb.target(), &remote(&topic), p);
        source_batches += src.len();
        let (src, dst) = (records_of(&src), records_of(&dst));
        assert_eq!(src.len(), dst.len(), "{what}: record count");
        assert_same_records(&what, &src, &dst);
        assert!(
            src.iter().zip(&dst).all(|(s, d)| s.offset == d.offset),
            "{what}: target offsets differ from the source's (both logs start empty and dense)"
        );
    }
    eprintln!(
        "{source_batches} source batches, {} produced, {} merged",
        summary.batches, summary.merged
    );
    assert!(
        summary.merged > 0 && summary.batches * 2 < source_batches as u64,
        "{source_batches} source batches became {} target batches ({} merged): small batches were not merged",
        summary.batches,
        summary.merged
    );
}

/// A backlog of batches of a few KiB in every codec (Kafka's perf producer, `batch.size` 4096,
/// records of 160 hex characters) is forwarded as it came, though every batch queues behind a
/// full produce window: only batches under a sixteenth of `batch.size` are merged.
#[test]
fn a_backlog_of_batches_of_a_few_kib_is_forwarded_as_it_came_in_every_codec() {
    let tb = Testbed::get();
    let stem = unique("dp-kib");
    // Varied text so that each codec compresses a batch to a few KiB, not to nothing.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let lines: Vec<String> = (0..500)
        .map(|_| {
            (0..10)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    format!("{:016x}", x)
                })
                .collect()
        })
        .collect();
    let payload = strait_tests::temp_file(&lines.join("\n"));
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    for codec in codecs {
        let topic = format!("{stem}-{codec}");
        create_topic(tb.source(), &topic, 1, &[]);
        kafka_tool_ok(
            "kafka-producer-perf-test",
            &[
                "--topic",
                &topic,
                "--num-records",
                "3000",
                "--throughput",
                "-1",
                "--payload-file",
                payload.to_str().unwrap(),
                "--producer-props",
                &format!("bootstrap.servers={}", tb.source()),
                &format!("compression.type={codec}"),
                "batch.size=4096",
                "linger.ms=100",
                "acks=-1",
            ],
            None,
        );
    }
    let exit = run_until_caught_up(&config(&format!("{stem}-.*")), "uring");
    exit.expect_code(0);
    let summary = exit.summary();
    assert_eq!(summary.records, 3000 * codecs.len() as u64);
    assert_eq!(summary.merged, 0, "{}", tail(&exit.stderr, 10));
    for codec in codecs {
        let topic = format!("{stem}-{codec}");
        let src = read_batches(tb.source(), &topic, 0);
        let dst = read_batches(tb.target(), &remote(&topic), 0);
        let mut sizes: Vec<usize> = src.iter().map(|b| b.as_bytes().len()).collect();
        sizes.sort_unstable();
        eprintln!(
            "{codec}: {} source batches of {}-{} bytes (median {}), {} target batches",
            src.len(),
            sizes[0],
            sizes[sizes.len() - 1],
            sizes[sizes.len() / 2],
            dst.len()
        );
        assert!(
            sizes[sizes.len() / 2] >= 1024,
            "{codec}: the producer wrote tiny batches, the test proves nothing"
        );
        assert_eq!(src.len(), dst.len(), "{codec}: batch count");
        for (s, d) in src.iter().zip(&dst) {
            let at = format!("{topic}, batch at {}", s.base_offset());
            assert_eq!(d.base_offset(), s.base_offset(), "{at}");
            assert_eq!(d.compression(), s.compression(), "{at}");
            assert!(
                d.as_bytes()[61..] == s.as_bytes()[61..],
                "{at}: the records section (bytes 61..) differs: the batch was not forwarded as it came"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Transactions
// ---------------------------------------------------------------------------------------------

fn transactions(io: &str) {
    let tb = Testbed::get();
    let topic = unique("dp-txn");
    let partitions = 3;
    create_topic(tb.source(), &topic, partitions, &[]);
    let out = strait_produce().run(&["txn", tb.source(), &topic, "3", "6", "20"], None);
    let counts: Vec<u64> = out
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [committed, aborted, plain] = counts[..] else {
        panic!("unexpected producer output {out:?}");
    };
    assert!(
        committed > 0 && aborted > 0,
        "both outcomes must occur: {out}"
    );

    // What the log holds (aborted data included) and, from the values the producer chose, what
    // read_committed must deliver.
    let mut expected: BTreeMap<i32, Vec<LogRecord>> = BTreeMap::new();
    let mut control_batches = 0;
    for p in 0..partitions {
        let batches = read_batches(tb.source(), &topic, p);
        control_batches += batches.iter().filter(|b| b.is_control()).count();
        let all = records_of(&batches);
        expected.insert(
            p,
            all.into_iter()
                .filter(|r| !r.value_str().ends_with("-abort"))
                .collect(),
        );
    }
    assert!(
        control_batches > 0,
        "the source log holds transaction markers"
    );
    let expected_total: usize = expected.values().map(Vec::len).sum();
    assert_eq!(expected_total as u64, committed + plain);

    let exit = run_until_caught_up(&config(&topic), io);
    exit.expect_code(0);
    assert_eq!(exit.summary().records, committed + plain);

    for p in 0..partitions {
        let what = format!("{topic}-{p} (--io {io})");
        let dst = read_batches(tb.target(), &remote(&topic), p);
        assert!(
            dst.iter().all(|b| !b.is_control() && !b.is_transactional()),
            "{what}: the target holds control or transactional batches"
        );
        assert_same_records(&what, &expected[&p], &records_of(&dst));
    }

    // Kafka's own consumer agrees.
    let lines = kafka_tool_ok(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            tb.target(),
            "--topic",
            &remote(&topic),
            "--from-beginning",
            "--isolation-level",
            "read_committed",
            "--max-messages",
            &expected_total.to_string(),
            "--timeout-ms",
            "20000",
            "--property",
            "print.partition=true",
        ],
        None,
    );
    let mut seen: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for line in lines.lines() {
        let (part, value) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("unexpected console-consumer line {line:?}"));
        let p: i32 = part
            .strip_prefix("Partition:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected console-consumer line {line:?}"));
        seen.entry(p).or_default().push(value.to_string());
    }
    for p in 0..partitions {
        let want: Vec<String> = expected[&p].iter().map(LogRecord::value_str).collect();
        assert_eq!(
            seen.get(&p).cloned().unwrap_or_default(),
            want,
            "console consumer, partition {p}"
        );
    }
}

on_both_drivers!(transactions_only_committed, super::transactions);

// ---------------------------------------------------------------------------------------------
// 3. Compacted source after cleaning
// ---------------------------------------------------------------------------------------------

/// Reads the whole topic until the cleaner has left offset gaps and the log has stopped
/// changing; returns it.
fn wait_for_cleaned(addr: &str, topic: &str, timeout: Duration) -> BTreeMap<i32, Vec<LogRecord>> {
    let start = Instant::now();
    let mut last: Option<BTreeMap<i32, Vec<LogRecord>>> = None;
    loop {
        let now = read_topic(addr, topic);
        let gaps = now
            .values()
            .all(|recs| recs.windows(2).any(|w| w[1].offset != w[0].offset + 1));
        if gaps && last.as_ref() == Some(&now) {
            return now;
        }
        assert!(
            start.elapsed() < timeout,
            "the log cleaner did not clean {topic} within {timeout:?} (gaps in every partition: {gaps})"
        );
        last = Some(now);
        std::thread::sleep(Duration::from_millis(1500));
    }
}

fn compacted(io: &str) {
    let tb = Testbed::get();
    let topic = unique("dp-compact");
    let partitions = 2;
    create_topic(
        tb.source(),
        &topic,
        partitions,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("min.compaction.lag.ms", "0"),
        ],
    );
    let out = strait_produce().run(
        &[
            "compact",
            tb.source(),
            &topic,
            &partitions.to_string(),
            "60",
            "12",
            "150",
        ],
        None,
    );
    let written: usize = out
        .trim()
        .strip_prefix("written ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected producer output {out:?}"));
    let before = wait_for_cleaned(tb.source(), &topic, Duration::from_secs(45));
    let surviving: usize = before.values().map(Vec::len).sum();
    assert!(
        surviving < written,
        "the cleaner removed records ({surviving} of {written} left)"
    );
    let batches: Vec<_> = (0..partitions)
        .flat_map(|p| read_batches(tb.source(), &topic, p))
        .collect();
    let thinned = batches.iter().filter(|b| !b.is_dense()).count();
    let empty = batches.iter().filter(|b| b.records_count() == 0).count();
    let horizon = batches.iter().filter(|b| b.has_delete_horizon()).count();
    eprintln!(
        "{surviving} of {written} records survived the cleaner; {thinned} batches have gaps, \
         {empty} are empty, {horizon} carry a delete horizon"
    );
    assert!(
        empty > 0,
        "the cleaner keeps the first producer's emptied last batch (recordsCount 0)"
    );
    assert!(
        thinned > 0,
        "some source batch has gaps inside (lastOffsetDelta + 1 != recordsCount)"
    );

    let exit = run_until_caught_up(&config(&topic), io);
    exit.expect_code(0);
    let summary = exit.summary();
    assert!(
        summary.rebuilt > 0,
        "thinned batches must be rebuilt: {summary:?}"
    );
    assert_eq!(summary.records, surviving as u64);

    assert_eq!(
        read_topic(tb.source(), &topic),
        before,
        "the source changed during the run; the comparison would mean nothing"
    );
    for (p, src) in &before {
        let what = format!("{topic}-{p} (--io {io})");
        let dst = read_records(tb.target(), &remote(&topic), *p);
        assert_same_records(&what, src, &dst);
        // Dense on the target: the gaps were renumbered.
        for (i, r) in dst.iter().enumerate() {
            assert_eq!(r.offset, i as i64, "{what}: target offsets are dense");
        }
    }
}

on_both_drivers!(compacted_source_after_cleaning, super::compacted);

// ---------------------------------------------------------------------------------------------
// 4. Restart in the middle of a run
// ---------------------------------------------------------------------------------------------

/// Per partition: the target's values must be the source's, in order, except for one run of
/// re-sent records right where the restart happened. Returns the number of duplicates.
fn duplicates_after_restart(what: &str, src: &[LogRecord], dst: &[LogRecord]) -> usize {
    let s: Vec<String> = src.iter().map(LogRecord::value_str).collect();
    let d: Vec<String> = dst.iter().map(LogRecord::value_str).collect();
    assert!(
        d.len() >= s.len(),
        "{what}: {} records missing",
        s.len() - d.len()
    );
    let dups = d.len() - s.len();
    // The target is s[..a] followed by s[a - dups..]: a prefix, then a restart `dups` back.
    let a = d
        .iter()
        .zip(&s)
        .position(|(x, y)| x != y)
        .unwrap_or(s.len().min(d.len()));
    if dups == 0 {
        assert_eq!(d, s, "{what}: records differ");
        return 0;
    }
    assert!(
        a >= dups,
        "{what}: the target diverges at {a} with {dups} extra records"
    );
    assert!(
        d[a..] == s[a - dups..],
        "{what}: after the restart point {a}, the target is not the source from {}",
        a - dups
    );
    dups
}

fn restart(io: &str, signal: &str) {
    let tb = Testbed::get();
    let topic = unique(&format!("dp-restart-{}", signal.to_lowercase()));
    let partitions = 4;
    let total: i64 = 200_000;
    create_topic(tb.source(), &topic, partitions, &[]);
    let cfg = config(&topic);

    // strait follows a source that is still being written (25 000 records a second, for 8 s)
    // and is stopped in the middle, once every partition has stored progress (written every
    // second).
    let first = Strait::start(strait_bin(), &cfg, &["--io", io, "--shards", "2"]);
    let producer = strait_produce().spawn(&[
        "bulk",
        tb.source(),
        &topic,
        &partitions.to_string(),
        &total.to_string(),
        "100",
        "25000",
    ]);
    let start = Instant::now();
    let stored_now = || {
        let all = stored_progress(tb.target(), "A");
        (0..partitions)
            .map(|p| {
                all.get(&TopicPartition::new(&topic, p))
                    .copied()
                    .unwrap_or(0)
            })
            .collect::<Vec<i64>>()
    };
    while stored_now().contains(&0) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "strait stored no progress for every partition within 30 s; stderr:\n{}",
            first.stderr()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let stopped_after = start.elapsed();
    first.signal(signal);
    let stopped = first.wait(Duration::from_secs(40));
    match signal {
        "TERM" => stopped.expect_code(0),
        _ => {
            assert_eq!(stopped.code, None, "SIGKILL ends the process");
            &stopped
        }
    };
    let at_stop: Vec<i64> = offsets(tb.target(), &remote(&topic))
        .iter()
        .map(|(_, hi)| *hi)
        .collect();
    let stored = stored_now();
    strait_produce().finish(producer);
    let src_batches: Vec<_> = (0..partitions)
        .map(|p| read_batches(tb.source(), &topic, p))
        .collect();
    let replicated: i64 = at_stop.iter().sum();
    eprintln!(
        "SIG{signal} after {stopped_after:?}: target holds {at_stop:?} ({replicated} of {total}), stored progress {stored:?}"
    );
    assert!(
        replicated < total,
        "strait finished before it was stopped: the test did not stop it mid-way"
    );

    run_until_caught_up(&cfg, io).expect_code(0);

    let mut report = Vec::new();
    let mut total_dups = 0;
    for p in 0..partitions {
        let what = format!("{topic}-{p} (--io {io}, SIG{signal})");
        let src = records_of(&src_batches[p as usize]);
        let dst = read_records(tb.target(), &remote(&topic), p);
        let dups = duplicates_after_restart(&what, &src, &dst);
        // Progress is stored once a second, so after SIGKILL the target holds records written
        // past the stored position. At start strait counts them against the stored target
        // offset, checks them against the source, and resumes after them: nothing is written
        // twice, whatever the signal (see control/src/duties/recovery.rs).
        let (written, stored) = (at_stop[p as usize], stored[p as usize]);
        assert_eq!(
            dups, 0,
            "{what}: the restart copied records the target already held (written {written}, stored progress {stored})"
        );
        // The broker's dedup window: the records of the largest 5 source batches.
        let mut sizes: Vec<usize> = src_batches[p as usize]
            .iter()
            .map(|b| b.records_count() as usize)
            .collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let window: usize = sizes.iter().take(IN_FLIGHT_BATCHES).sum();
        report.push(format!(
            "partition {p}: {dups} duplicates (written {written}, stored progress {stored}; {IN_FLIGHT_BATCHES} batches = {window} records)"
        ));
        total_dups += dups;
    }
    eprintln!(
        "SIG{signal} --io {io}: {total_dups} duplicates\n  {}",
        report.join("\n  ")
    );
}

on_both_drivers!(restart_after_sigterm, |io| super::restart(io, "TERM"));
on_both_drivers!(restart_after_sigkill, |io| super::restart(io, "KILL"));

// ---------------------------------------------------------------------------------------------
// 5. A broken partition
// ---------------------------------------------------------------------------------------------

fn broken_partition(io: &str) {
    let tb = Testbed::get();
    let topic = unique("dp-broken");
    let partitions = 3;
    let broken = 1;
    create_topic(tb.source(), &topic, partitions, &[]);
    create_topic(
        tb.target(),
        &remote(&topic),
        partitions,
        &[("max.message.bytes", "2048")],
    );
    strait_produce().run(
        &[
            "big",
            tb.source(),
            &topic,
            &partitions.to_string(),
            &broken.to_string(),
            "5000",
            "20",
        ],
        None,
    );

    // The tiny limit exists only on the target, so topic config sync would remove it (as
    // MirrorMaker's does: a default on the source is deleted on the target), racing the first
    // produce. This test is about the data plane, so the limit must stay.
    let cfg = testbed_mm2_config(
        &topic,
        "A->B.heartbeats.replication.enabled = false\nsync.topic.configs.enabled = false",
    );
    let exit = run_until_caught_up(&cfg, io);
    exit.expect_code(2);
    let line = exit
        .stderr
        .lines()
        .find(|l| l.contains(&format!("partition {topic}-{broken} stopped")))
        .unwrap_or_else(|| {
            panic!(
                "stderr does not say that {topic}-{broken} stopped:\n{}",
                exit.stderr
            )
        });
    assert!(
        line.contains("max.message.bytes") && line.contains("2048"),
        "the error says the record is too large for max.message.bytes=2048: {line}"
    );
    for p in 0..partitions {
        if p == broken {
            continue;
        }
        assert!(
            !exit
                .stderr
                .contains(&format!("partition {topic}-{p} stopped")),
            "{topic}-{p} stopped too:\n{}",
            exit.stderr
        );
    }

    let mut counts = HashMap::new();
    for p in 0..partitions {
        let what = format!("{topic}-{p} (--io {io})");
        let src = read_records(tb.source(), &topic, p);
        let dst = read_records(tb.target(), &remote(&topic), p);
        counts.insert(p, (src.len(), dst.len()));
        if p == broken {
            // Everything before the big record at most, nothing from it on.
            let big = src
                .iter()
                .position(|r| r.key.as_deref() == Some(b"big".as_slice()))
                .expect("the big record is in the source");
            assert!(
                dst.len() <= big,
                "{what}: records at or past the big one arrived"
            );
            assert_same_records(&what, &src[..dst.len()], &dst);
        } else {
            assert_same_records(&what, &src, &dst);
        }
    }
    eprintln!("records (source, target) per partition: {counts:?}");
}

on_both_drivers!(broken_partition_stops_alone, super::broken_partition);
