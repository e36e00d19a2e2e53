//! Several `strait run` processes sharing the work through a Kafka group on the target cluster
//! (`strait.group.*`), against the real test bed: each member replicates only what the leader
//! assigned it, the singleton duties run once, a killed member's partitions move to the others
//! without losing a record, and a member with another configuration is refused.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use strait_control::offsets::Heartbeat;
use strait_control::store::progress;
use strait_tests::log::{create_topic, offsets, read_batches, read_records, read_topic};
use strait_tests::strait::Strait;
use strait_tests::{Testbed, testbed_clusters_config, testbed_mm2_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// Short group timings, so that a dead member's partitions move within seconds.
const GROUP: &str = "strait.group.session.timeout.ms = 6000\n\
                     strait.group.heartbeat.interval.ms = 1000\n\
                     strait.group.rebalance.timeout.ms = 10000\n\
                     strait.api.listen = 127.0.0.1:0\n\
                     refresh.topics.interval.seconds = 2\n";

/// One of the [`GROUP`] timings.
fn group_timing(key: &str) -> Duration {
    let ms = GROUP
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix(key)?
                .trim()
                .strip_prefix('=')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("GROUP sets no {key}"));
    Duration::from_millis(ms)
}

/// strait's bound on unsettled batches per partition (and the broker's deduplication window):
/// what a member may have on the wire for a partition when it loses it.
const IN_FLIGHT_BATCHES: usize = 5;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn http_get(addr: &str, path: &str) -> Option<serde_json::Value> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    serde_json::from_str(out.split_once("\r\n\r\n")?.1).ok()
}

/// Polls `f` until it returns Some, at most `secs` seconds; on timeout fails with `log()`.
fn eventually<T>(
    secs: u64,
    what: &str,
    log: impl Fn() -> String,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A member: its process and API address.
struct Member {
    strait: Strait,
    api: String,
}

impl Member {
    fn start(cfg: &Path) -> Member {
        let strait = Strait::start(Path::new(STRAIT), cfg, &[]);
        let api = eventually(
            60,
            "the API address in the log",
            || strait.stderr(),
            || strait.api_address(),
        );
        Member { strait, api }
    }

    fn status(&self) -> Option<serde_json::Value> {
        http_get(&self.api, "/status")
    }

    /// `(generation, members, this member's units, its partitions in /status)`.
    fn group(&self) -> Option<(i64, usize, usize, Vec<i64>)> {
        let v = self.status()?;
        let g = &v["group"];
        if g["state"] != "stable" {
            return None;
        }
        let parts = v["flows"][0]["partitions"]
            .as_array()?
            .iter()
            .filter_map(|p| p["partition"].as_i64())
            .collect();
        Some((
            g["generation"].as_i64()?,
            g["members"].as_array()?.len(),
            g["assignment"].as_array()?.len(),
            parts,
        ))
    }
}

fn logs(members: &[&Member]) -> String {
    members
        .iter()
        .enumerate()
        .map(|(i, m)| format!("--- member {i}:\n{}", m.strait.stderr()))
        .collect()
}

/// Waits until every member is stable in the same generation with `members.len()` members,
/// their units balanced to within one and every partition of the flow held by exactly one.
fn wait_balanced(members: &[&Member], partitions: usize) -> Vec<usize> {
    eventually(
        90,
        "a balanced group",
        || logs(members),
        || {
            let views: Vec<_> = members.iter().map(|m| m.group()).collect::<Option<_>>()?;
            let generation = views[0].0;
            if views
                .iter()
                .any(|v| v.0 != generation || v.1 != members.len())
            {
                return None;
            }
            let units: Vec<usize> = views.iter().map(|v| v.2).collect();
            let held: Vec<i64> = views.iter().flat_map(|v| v.3.clone()).collect();
            let distinct: BTreeSet<i64> = held.iter().copied().collect();
            let (lo, hi) = (units.iter().min()?, units.iter().max()?);
            (hi - lo <= 1
                && units.iter().sum::<usize>() == partitions + 1
                && held.len() == partitions
                && distinct.len() == partitions)
                .then_some(units)
        },
    )
}

/// Writes `n` records to `topic` with Kafka's verifiable producer, as fast as it goes.
fn produce(topic: &str, n: u64) {
    let status = verifiable_producer(topic, n, 100_000)
        .wait()
        .expect("the producer runs");
    assert!(status.success(), "kafka-verifiable-producer failed");
}

/// Waits until the remote topic's ends equal the source's, partition by partition.
fn wait_copied(topic: &str, remote: &str, members: &[&Member]) {
    let tb = Testbed::get();
    eventually(
        60,
        "the target to hold every source record",
        || logs(members),
        || {
            let src = offsets(tb.source(), topic);
            let dst = strait_tests::log::try_offsets(tb.target(), remote)?;
            (src.iter().map(|o| o.1).collect::<Vec<_>>()
                == dst.iter().map(|o| o.1).collect::<Vec<_>>())
            .then_some(())
        },
    );
}

#[test]
fn one_instance_then_two_more_share_the_partitions_and_copy_each_record_once() {
    let tb = Testbed::get();
    let topic = unique("group");
    create_topic(tb.source(), &topic, 12, &[]);
    produce(&topic, 600);
    // Aliases of its own, so that its heartbeats can be counted.
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let (src, tgt) = (format!("S{tag}"), format!("T{tag}"));
    let remote = format!("{src}.{topic}");
    let cfg = testbed_clusters_config(
        &src,
        &tgt,
        &format!(
            "{src}->{tgt}.enabled = true\n{src}->{tgt}.topics = {topic}\n\
             {tgt}->{src}.emit.heartbeats.enabled = false\n\
             heartbeats.replication.enabled = false\n\
             emit.heartbeats.interval.seconds = 1\n{GROUP}"
        ),
    );

    let first = Member::start(&cfg);
    // Alone: a group of one holds everything.
    let units = wait_balanced(&[&first], 12);
    assert_eq!(units, vec![13]);
    wait_copied(&topic, &remote, &[&first]);

    let second = Member::start(&cfg);
    let third = Member::start(&cfg);
    let all = [&first, &second, &third];
    let units = wait_balanced(&all, 12);
    assert_eq!(units.iter().sum::<usize>(), 13);
    produce(&topic, 600);
    wait_copied(&topic, &remote, &all);
    // Copied exactly once: the hand-over flushed the progress before the partitions moved.
    let total: i64 = offsets(tb.target(), &remote).iter().map(|o| o.1).sum();
    assert_eq!(total, 1200, "{}", logs(&all));
    // While copying, each member's own row in the group table shows its throughput (measured
    // over 10 s windows, so production runs for longer than one).
    let mut producer = verifiable_producer(&topic, 3_000, 200);
    for m in all {
        let measured = eventually(
            30,
            "this member's own throughput above 0 in the group table",
            || logs(&all),
            || {
                let v = m.status()?;
                let me = v["group"]["member_id"].as_str()?.to_string();
                let row = v["group"]["members"]
                    .as_array()?
                    .iter()
                    .find(|r| r["member_id"] == me.as_str())?
                    .clone();
                (row["throughput_bytes_per_sec"].as_u64()? > 0).then_some(row)
            },
        );
        assert!(
            measured["throughput_at_ms"].as_i64() > Some(now_ms() - 30_000),
            "{measured}"
        );
    }
    assert!(producer.wait().expect("producer ends").success());

    // The remote topic was created once, by the first member; only one member holds the
    // singleton duties.
    let created: usize = all
        .iter()
        .map(|m| m.strait.stderr().matches("created remote topic").count())
        .sum();
    assert_eq!(created, 1, "{}", logs(&all));
    let singletons = all
        .iter()
        .filter(|m| m.status().is_some_and(|v| v["group"]["singleton"] == true))
        .count();
    assert_eq!(singletons, 1);
    // `strait ctl status` shows the group.
    let out = Command::new(STRAIT)
        .args(["ctl", "--api", &second.api, "status"])
        .output()
        .expect("strait ctl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("group strait-") && text.contains(": stable, generation"),
        "{text}"
    );
    assert!(
        text.contains("MEMBER") && text.contains("last rebalance:"),
        "{text}"
    );
    // A reload cannot be agreed by several members: refused, naming the group, and nothing
    // changes (a changed file would otherwise replicate beside the others' configuration).
    let out = Command::new(STRAIT)
        .args(["ctl", "--api", &second.api, "reload"])
        .output()
        .expect("strait ctl runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("409") && err.contains("group strait-"),
        "{err}"
    );
    // MM2's heartbeats (every second) come from that one member only.
    let since = now_ms();
    std::thread::sleep(Duration::from_secs(5));
    let until = now_ms();
    let beats = read_topic(tb.target(), "heartbeats")
        .values()
        .flatten()
        .filter(|r| {
            let (Some(k), Some(v)) = (r.key.as_deref(), r.value.as_deref()) else {
                return false;
            };
            Heartbeat::decode(k, v)
                .is_ok_and(|h| h.source_alias == src && (since..until).contains(&h.timestamp_ms))
        })
        .count();
    assert!(
        (3..=7).contains(&beats),
        "{beats} heartbeats in 5 s\n{}",
        logs(&all)
    );

    for m in all {
        m.strait.signal("TERM");
    }
    for m in [first, second, third] {
        m.strait.wait(Duration::from_secs(30)).expect_code(0);
    }
}

#[test]
fn a_member_with_other_topics_is_refused_and_names_the_key() {
    let tb = Testbed::get();
    let (t1, t2) = (unique("grp-a"), unique("grp-b"));
    create_topic(tb.source(), &t1, 1, &[]);
    create_topic(tb.source(), &t2, 1, &[]);
    let group = format!("strait.group.id = {}\n{GROUP}", unique("refuse"));
    let first = Member::start(&testbed_mm2_config(&t1, &group));
    eventually(
        60,
        "the first member stable",
        || first.strait.stderr(),
        || first.group(),
    );
    let second = Strait::start(Path::new(STRAIT), &testbed_mm2_config(&t2, &group), &[]);
    let exit = second.wait(Duration::from_secs(60));
    assert_ne!(exit.code, Some(0), "{}", exit.stderr);
    assert!(
        exit.stderr.contains("A->B.topics (different value)"),
        "{}",
        exit.stderr
    );
    // The first member goes on, alone.
    eventually(
        30,
        "the first member alone again",
        || first.strait.stderr(),
        || first.group().filter(|g| g.1 == 1),
    );
    first.strait.signal("TERM");
    first.strait.wait(Duration::from_secs(30)).expect_code(0);
}

/// Static membership (`strait.group.instance.id`): a second process started with the same id
/// takes the member's place, and the first, fenced (FENCED_INSTANCE_ID), stops with an error
/// naming the key instead of joining again and fencing the other in turn.
#[test]
fn a_second_process_with_the_same_instance_id_stops_the_first() {
    let tb = Testbed::get();
    let topic = unique("grp-static");
    create_topic(tb.source(), &topic, 2, &[]);
    let group = format!(
        "strait.group.id = {}\nstrait.group.instance.id = static-1\n{GROUP}",
        unique("static")
    );
    let cfg = testbed_mm2_config(&topic, &group);
    let first = Member::start(&cfg);
    eventually(
        60,
        "the first member stable",
        || first.strait.stderr(),
        || first.group(),
    );
    let second = Member::start(&cfg);
    let exit = first.strait.wait(Duration::from_secs(60));
    assert_ne!(exit.code, Some(0), "{}", exit.stderr);
    assert!(
        exit.stderr.contains("FencedInstanceId")
            && exit.stderr.contains("strait.group.instance.id"),
        "{}",
        exit.stderr
    );
    // The second holds everything, alone, in the same group.
    eventually(
        60,
        "the second member alone with both partitions",
        || second.strait.stderr(),
        || second.group().filter(|g| g.1 == 1 && g.3.len() == 2),
    );
    second.strait.signal("TERM");
    second.strait.wait(Duration::from_secs(30)).expect_code(0);
}

/// Kafka's `kafka-verifiable-producer` on the source: `n` records at `per_second`, acks=all.
fn verifiable_producer(topic: &str, n: u64, per_second: u64) -> std::process::Child {
    strait_tests::verifiable_producer(Testbed::get().source(), topic, n, per_second)
}

/// Source records missing on the target and target records beyond the source's (duplicates),
/// comparing values partition by partition.
fn lost_and_duplicates(topic: &str) -> (usize, usize) {
    let tb = Testbed::get();
    let src = read_topic(tb.source(), topic);
    let dst = read_topic(tb.target(), &format!("A.{topic}"));
    let (mut lost, mut dups) = (0, 0);
    for (p, records) in &src {
        let mut got: BTreeMap<String, usize> = BTreeMap::new();
        for r in dst.get(p).into_iter().flatten() {
            *got.entry(r.value_str()).or_default() += 1;
        }
        let held: usize = got.values().sum();
        lost += records
            .iter()
            .filter(|r| !got.contains_key(&r.value_str()))
            .count();
        dups += held.saturating_sub(records.len());
    }
    (lost, dups)
}

/// What may have been in flight when partitions changed hands, from the remote topic itself:
/// each member's shard writes a partition with its own idempotent producer, and has at most
/// [`IN_FLIGHT_BATCHES`] batches of it unacknowledged when it loses the partition; only those can
/// land after the next owner read the target's tail (crash recovery skips what is there by
/// then). So every stretch of a remote partition's log written by one producer and followed by
/// another's ends in at most that many batches that can be copied twice, and the records of
/// those batches bound the duplicates. Returns (that bound, the number of such stretches).
fn in_flight_at_hand_overs(topic: &str) -> (usize, usize) {
    let tb = Testbed::get();
    let remote = format!("A.{topic}");
    let (mut bound, mut hand_overs) = (0, 0);
    for p in 0..offsets(tb.target(), &remote).len() as i32 {
        // Records per batch, in stretches of one producer id.
        let mut stretches: Vec<Vec<usize>> = Vec::new();
        let mut writer = None;
        for b in read_batches(tb.target(), &remote, p) {
            if writer != Some(b.producer_id()) {
                writer = Some(b.producer_id());
                stretches.push(Vec::new());
            }
            if let Some(s) = stretches.last_mut() {
                s.push(b.records_count() as usize);
            }
        }
        stretches.pop();
        for s in stretches {
            hand_overs += 1;
            bound += s.iter().rev().take(IN_FLIGHT_BATCHES).sum::<usize>();
        }
    }
    (bound, hand_overs)
}

/// Three members of one group replicating a new topic of six partitions, balanced.
fn three_members(prefix: &str) -> (String, std::path::PathBuf, Vec<Member>) {
    let topic = unique(prefix);
    create_topic(Testbed::get().source(), &topic, 6, &[]);
    let cfg = testbed_mm2_config(&topic, GROUP);
    let members: Vec<Member> = (0..3).map(|_| Member::start(&cfg)).collect();
    wait_balanced(&members.iter().collect::<Vec<_>>(), 6);
    (topic, cfg, members)
}

/// A member that does not hold the singleton duties, and the others.
fn pick_plain_member(members: &[Member]) -> (usize, Vec<&Member>) {
    let i = members
        .iter()
        .position(|m| m.status().is_some_and(|v| v["group"]["singleton"] != true))
        .expect("a member without the singleton duties");
    let rest = members
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, m)| m)
        .collect();
    (i, rest)
}

/// After the producer ended: waits until no source record is missing on the target, checks
/// that stored progress never moved back, and returns the duplicates.
fn finish_production(
    producer: &mut std::process::Child,
    topic: &str,
    members: &[&Member],
) -> usize {
    assert!(producer.wait().expect("producer ends").success());
    let dups = eventually(
        60,
        "every record on the target",
        || logs(members),
        || {
            let (lost, dups) = lost_and_duplicates(topic);
            (lost == 0).then_some(dups)
        },
    );
    assert_progress_never_moved_back(topic);
    dups
}

/// SIGTERM to each member, every one exiting cleanly.
fn stop_all(members: Vec<Member>) {
    for m in &members {
        m.strait.signal("TERM");
    }
    for m in members {
        m.strait.wait(Duration::from_secs(30)).expect_code(0);
    }
}

/// Waits until every partition of `topic` has `n` records copied: the producer runs (its JVM
/// can take seconds to start on a busy machine) and every member replicates, so that what
/// follows happens under load rather than before it.
fn wait_under_way(topic: &str, n: i64, members: &[&Member]) {
    let tb = Testbed::get();
    let remote = format!("A.{topic}");
    eventually(
        90,
        &format!("{n} records copied in every partition"),
        || logs(members),
        || {
            let ends = strait_tests::log::try_offsets(tb.target(), &remote)?;
            (!ends.is_empty() && ends.iter().all(|o| o.1 >= n)).then_some(())
        },
    );
}

#[test]
fn a_killed_member_loses_nothing_and_its_partitions_resume_elsewhere() {
    let (topic, _, members) = three_members("group-kill");
    let mut producer = verifiable_producer(&topic, 6_000, 1_000);
    wait_under_way(&topic, 100, &members.iter().collect::<Vec<_>>());
    let (victim, rest) = pick_plain_member(&members);
    members[victim].strait.signal("KILL");
    let killed_at = Instant::now();
    wait_balanced(&rest, 6);
    let moved = killed_at.elapsed();
    // The coordinator expires the killed member at most a session after its last heartbeat,
    // the others learn of the rebalance at their next heartbeat, and the join phase ends at
    // the rebalance timeout at the latest.
    let bound = group_timing("strait.group.session.timeout.ms")
        + group_timing("strait.group.heartbeat.interval.ms")
        + group_timing("strait.group.rebalance.timeout.ms");
    assert!(
        moved < bound,
        "the partitions moved after {moved:?}, more than session + heartbeat + rebalance timeout ({bound:?})\n{}",
        logs(&rest)
    );
    let dups = finish_production(&mut producer, &topic, &rest);
    // At most what was in flight at the kill: the killed member's unflushed progress does not
    // count, as its successors' crash recovery skips what the target holds past it.
    let (in_flight, hand_overs) = in_flight_at_hand_overs(&topic);
    // How the survivors resumed the moved partitions (crash recovery's verdict).
    let resumed: Vec<String> = logs(&rest)
        .lines()
        .filter(|l| {
            l.contains("resuming after them")
                || l.contains("may be copied again")
                || l.contains("cannot check how far")
        })
        .map(str::to_string)
        .collect();
    eprintln!(
        "moved after {moved:?} (bound {bound:?}), {dups} duplicates; in flight at the {hand_overs} \
         hand-overs: at most {in_flight} records; recovery: {resumed:#?}"
    );
    assert!(
        hand_overs > 0,
        "no remote partition was written by two members: the kill moved nothing under load"
    );
    assert!(
        dups <= in_flight,
        "{dups} duplicates, more than the {in_flight} records in flight at the {hand_overs} hand-overs\n{}",
        logs(&rest)
    );
    let mut members = members;
    drop(members.remove(victim));
    stop_all(members);
}

/// Every progress record written for `topic`'s partitions, in log order: the stored position
/// of a partition never moves back (a member that lost its partitions writes none of theirs).
fn assert_progress_never_moved_back(topic: &str) {
    let tb = Testbed::get();
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    for r in read_records(tb.target(), &progress::topic_name("A"), 0) {
        let (Some(k), Some(v)) = (r.key.as_deref(), r.value.as_deref()) else {
            continue;
        };
        let Ok(Some((tp, Some(e)))) = progress::decode("A", k, Some(v)) else {
            continue;
        };
        if tp.topic != topic {
            continue;
        }
        let before = last.insert(tp.partition, e.next_offset).unwrap_or(-1);
        assert!(
            e.next_offset >= before,
            "the progress of {topic}-{} moved back from {before} to {} (at offset {} of the progress topic)",
            tp.partition,
            e.next_offset,
            r.offset
        );
    }
    assert!(!last.is_empty(), "no progress stored for {topic}");
}

#[test]
fn a_member_stopped_past_its_session_is_fenced_writes_nothing_stale_and_rejoins() {
    let (topic, _, members) = three_members("group-stop");
    let mut producer = verifiable_producer(&topic, 10_000, 1_000);
    std::thread::sleep(Duration::from_secs(2));
    let (frozen, rest) = pick_plain_member(&members);
    members[frozen].strait.signal("STOP");
    let stopped_at = Instant::now();
    wait_balanced(&rest, 6);
    // Well past the session timeout (6 s): the others replicate its partitions by now.
    std::thread::sleep(Duration::from_secs(10).saturating_sub(stopped_at.elapsed()));
    members[frozen].strait.signal("CONT");
    let all: Vec<&Member> = members.iter().collect();
    wait_balanced(&all, 6);
    let log = members[frozen].strait.stderr();
    assert!(
        log.contains("local session deadline") || log.contains("fenced this member"),
        "{log}"
    );
    let dups = finish_production(&mut producer, &topic, &all);
    // Its shards hold a lease (the local session deadline) and send nothing past it, so
    // after SIGCONT they write nothing of what they fetched before the freeze (without the
    // lease: 2 009 and 2 926 duplicates in two runs, the whole frozen stretch of its
    // partitions). What remains is what was in flight at the freeze.
    assert!(dups <= 1_000, "{dups} duplicates");
    eprintln!("SIGSTOP past the session: {dups} duplicates");
    stop_all(members);
}

/// Samples the source's and the remote topic's log ends every 100 ms while production goes on:
/// for each partition, the longest time its copy did not advance while the source held records
/// it had not copied yet (a partition with nothing to copy is not stalled).
struct StallMeter {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<BTreeMap<usize, Duration>>,
}

impl StallMeter {
    fn start(topic: &str, remote: &str) -> StallMeter {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (flag, topic, remote) = (stop.clone(), topic.to_string(), remote.to_string());
        let thread = std::thread::spawn(move || {
            let tb = Testbed::get();
            // Per partition: the target's end when last seen advancing (or caught up), and when.
            let mut last: BTreeMap<usize, (i64, Instant)> = BTreeMap::new();
            let mut worst: BTreeMap<usize, Duration> = BTreeMap::new();
            while !flag.load(Ordering::Relaxed) {
                let src = offsets(tb.source(), &topic);
                let dst = strait_tests::log::try_offsets(tb.target(), &remote).unwrap_or_default();
                let now = Instant::now();
                for (p, ((_, src_end), (_, dst_end))) in src.into_iter().zip(dst).enumerate() {
                    let seen = last.entry(p).or_insert((dst_end, now));
                    if dst_end != seen.0 || src_end <= dst_end {
                        *seen = (dst_end, now);
                    }
                    let w = worst.entry(p).or_default();
                    *w = (*w).max(now.saturating_duration_since(seen.1));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            worst
        });
        StallMeter { stop, thread }
    }

    /// The longest stall of each partition.
    fn finish(self) -> BTreeMap<usize, Duration> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().expect("the stall meter runs")
    }
}

/// Duplicates by partition: `(partition, target records beyond the source's)`, the nonzero ones.
fn duplicates_by_partition(topic: &str) -> Vec<(i32, usize)> {
    let tb = Testbed::get();
    let src = read_topic(tb.source(), topic);
    let dst = read_topic(tb.target(), &format!("A.{topic}"));
    src.iter()
        .map(|(p, r)| (*p, dst.get(p).map_or(0, Vec::len).saturating_sub(r.len())))
        .filter(|(_, d)| *d > 0)
        .collect()
}

#[test]
fn a_rolling_restart_of_every_member_loses_nothing() {
    let (topic, cfg, mut members) = three_members("group-roll");
    let mut producer = verifiable_producer(&topic, 12_000, 1_000);
    wait_under_way(&topic, 100, &members.iter().collect::<Vec<_>>());
    let meter = StallMeter::start(&topic, &format!("A.{topic}"));
    let started = Instant::now();
    let mut stopped_logs = Vec::new();
    for i in 0..3 {
        let m = members.remove(i);
        m.strait.signal("TERM");
        let exit = m.strait.wait(Duration::from_secs(30));
        exit.expect_code(0);
        stopped_logs.push(exit.stderr);
        members.insert(i, Member::start(&cfg));
        wait_balanced(&members.iter().collect::<Vec<_>>(), 6);
    }
    let restarted = started.elapsed();
    let all: Vec<&Member> = members.iter().collect();
    let dups = finish_production(&mut producer, &topic, &all);
    let stalls = meter.finish();
    let worst = stalls.values().max().copied().unwrap_or_default();
    eprintln!(
        "rolling restart of 3 members in {restarted:?}: 0 lost, {dups} duplicates {:?}, \
         longest stall per partition {:?} (worst {worst:?})",
        duplicates_by_partition(&topic),
        stalls
            .iter()
            .map(|(p, d)| (*p, d.as_millis()))
            .collect::<Vec<_>>()
    );
    // Clean stops and hand-overs flush their progress first and the next owner resumes after
    // the target's tail, so nothing is copied twice (the first test here checks exactly that);
    // but on a starved machine a member's session may lapse on the way (its partitions are
    // revoked at once, and what it had in flight may land after the next owner read the
    // target's tail, as after SIGSTOP), so duplicates are bounded by what was in flight at the
    // hand-overs, and the reason is reported.
    let mut all_logs = logs(&all);
    for (i, l) in stopped_logs.iter().enumerate() {
        all_logs.push_str(&format!("--- stopped member {i}:\n{l}"));
    }
    let unclean: Vec<&str> = [
        "local session deadline",
        "fenced this member",
        "did not stop within",
        "may copy some records again",
        "may be copied again",
        "cannot check how far the target got",
    ]
    .into_iter()
    .filter(|w| all_logs.contains(w))
    .collect();
    let (in_flight, hand_overs) = in_flight_at_hand_overs(&topic);
    eprintln!(
        "hand-overs not clean: {unclean:?}; in flight at the {hand_overs} hand-overs: at most \
         {in_flight} records"
    );
    assert!(
        hand_overs > 0,
        "no remote partition was written by two members: the restarts moved nothing under load"
    );
    assert!(
        dups <= in_flight,
        "{dups} duplicates, more than the {in_flight} records in flight at the {hand_overs} hand-overs\n{all_logs}"
    );
    stop_all(members);
}

/// Exactly-once in a group of three (issue 26): one member SIGKILLed three times, restarted
/// each time, then another SIGSTOPped past its session and resumed, while Kafka's verifiable
/// producer writes. Whoever takes a partition over fences its previous holder's transactional
/// producer and starts from the progress its last commit stored, so Kafka's read_committed
/// console consumer of the target reads every record exactly once, in order per partition.
#[test]
fn exactly_once_with_a_member_killed_repeatedly_and_one_frozen_copies_each_record_once() {
    let tb = Testbed::get();
    let topic = unique("group-eos");
    let remote = format!("A.{topic}");
    create_topic(tb.source(), &topic, 6, &[]);
    let cfg = testbed_mm2_config(
        &topic,
        &format!("{GROUP}B.exactly.once.source.support = enabled\n"),
    );
    let mut members: Vec<Member> = (0..3).map(|_| Member::start(&cfg)).collect();
    wait_balanced(&members.iter().collect::<Vec<_>>(), 6);
    let records: u64 = 30_000;
    let mut producer = verifiable_producer(&topic, records, 1_000);
    wait_under_way(&topic, 100, &members.iter().collect::<Vec<_>>());
    let (victim, _) = pick_plain_member(&members);
    for _ in 0..3 {
        members[victim].strait.signal("KILL");
        let killed = std::mem::replace(&mut members[victim], Member::start(&cfg));
        killed.strait.wait(Duration::from_secs(10));
        wait_balanced(&members.iter().collect::<Vec<_>>(), 6);
    }
    let (frozen, rest) = pick_plain_member(&members);
    members[frozen].strait.signal("STOP");
    let stopped_at = Instant::now();
    wait_balanced(&rest, 6);
    std::thread::sleep(Duration::from_secs(10).saturating_sub(stopped_at.elapsed()));
    members[frozen].strait.signal("CONT");
    let all: Vec<&Member> = members.iter().collect();
    wait_balanced(&all, 6);
    assert!(producer.wait().expect("producer ends").success());
    // Every committed record on the target, as strait's own resolver reads it; then the
    // verdict from Kafka's consumer.
    eventually(
        90,
        "every record committed on the target",
        || logs(&all),
        || {
            let n: usize = (0..6)
                .map(|p| strait_tests::log::read_committed_records(tb.target(), &remote, p).len())
                .sum();
            (n as u64 >= records).then_some(())
        },
    );
    let t = strait_tests::tally(
        &strait_tests::committed_values(tb.target(), &remote, records),
        records,
    );
    let fenced = logs(&all).matches("fenced: another holder").count();
    eprintln!("exactly-once in a group: {t:?}; {fenced} partitions of a member fenced");
    assert_eq!(
        (t.lost, t.duplicated, t.out_of_order, t.highest),
        (0, 0, 0, Some(records - 1)),
        "{records} produced; read_committed saw {t:?}\n{}",
        logs(&all)
    );
    stop_all(members);
}

/// A record read by the tool's consumer: (partition, offset).
fn consumed(out: &str) -> Vec<(i32, i64)> {
    out.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect()
}

/// Consumes at most `max` records (all when negative) of `topic` as `group` (read_committed,
/// earliest) and commits after the last one of each partition; returns (partition, offset).
fn consume_as(bootstrap: &str, group: &str, topic: &str, max: i64) -> Vec<(i32, i64)> {
    consumed(&strait_tests::consume_committed(
        bootstrap, group, topic, max,
    ))
}

/// `RemoteClusterUtils.translateOffsets(target, "A", group)`: offset by remote partition.
fn remote_cluster_utils(group: &str) -> BTreeMap<i32, i64> {
    strait_tests::offsets_tool()
        .run(
            &["remote-translate", Testbed::get().target(), "A", group],
            None,
        )
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Some((f.get(1)?.parse().ok()?, f.get(2)?.parse().ok()?))
        })
        .collect()
}

/// What an exact translation of `group`'s committed source offsets gives, from the records
/// themselves: the k-th committed source record of a partition is its k-th target record, so
/// a group that read k records resumes at the target offset of record k (the end, if none).
fn exact_translation(topic: &str, committed: &BTreeMap<i32, i64>) -> BTreeMap<i32, i64> {
    let tb = Testbed::get();
    let remote = format!("A.{topic}");
    let source = consume_as(tb.source(), &unique("console-consumer-src"), topic, -1);
    let target = consume_as(tb.target(), &unique("console-consumer-dst"), &remote, -1);
    let ends = offsets(tb.target(), &remote);
    committed
        .iter()
        .map(|(p, next)| {
            let read = source.iter().filter(|(sp, o)| sp == p && o < next).count();
            let on_target: Vec<i64> = target
                .iter()
                .filter(|(tp, _)| tp == p)
                .map(|(_, o)| *o)
                .collect();
            let at = on_target.get(read).copied().unwrap_or(ends[*p as usize].1);
            (*p, at)
        })
        .collect()
}

/// The offsets `group` committed on the source (after the last record of each partition).
fn committed_after(records: &[(i32, i64)], before: BTreeMap<i32, i64>) -> BTreeMap<i32, i64> {
    records.iter().fold(before, |mut m, (p, o)| {
        m.insert(*p, o + 1);
        m
    })
}

#[test]
fn checkpoints_after_a_rebalance_stay_exact_for_remote_cluster_utils() {
    let tb = Testbed::get();
    let topic = unique("group-ckpt");
    create_topic(tb.source(), &topic, 4, &[]);
    let produce_tx = |spec: &str| {
        strait_tests::offsets_tool().run(
            &["produce-tx", tb.source(), &topic, &unique("grp-txid"), spec],
            None,
        );
    };
    // Aborted transactions and markers: target offsets differ from source offsets, so only an
    // exact mapping translates right.
    produce_tx("c10,a6,c7,c3,a4,c12,a2,c9");
    let group = unique("ckpt-group");
    let committed = committed_after(
        &consume_as(tb.source(), &group, &topic, 17),
        BTreeMap::new(),
    );
    let cfg = testbed_mm2_config(
        &topic,
        &format!(
            "{GROUP}emit.checkpoints.interval.seconds = 1\n\
             sync.group.offsets.interval.seconds = 1\n\
             refresh.groups.interval.seconds = 1\n"
        ),
    );
    let first = Member::start(&cfg);
    wait_balanced(&[&first], 4);
    // The expectation is read from the records each time: the copy may still be under way.
    let expected = eventually(
        90,
        "exact checkpoints from one member",
        || first.strait.stderr(),
        || {
            let expected = exact_translation(&topic, &committed);
            (remote_cluster_utils(&group) == expected).then_some(expected)
        },
    );
    assert!(
        expected.iter().any(|(p, o)| committed[p] != *o),
        "the test needs offsets that differ: {expected:?} for {committed:?}"
    );

    // A second member takes half of the partitions; the group moves on on the source.
    let second = Member::start(&cfg);
    let both = [&first, &second];
    wait_balanced(&both, 4);
    let moved: Vec<i64> = second.group().map(|g| g.3).unwrap_or_default();
    assert!(!moved.is_empty(), "no partition moved to the second member");
    produce_tx("a3,c5,a2,c8");
    let committed = committed_after(&consume_as(tb.source(), &group, &topic, 20), committed);
    let last = std::cell::RefCell::new(String::new());
    let got = eventually(
        90,
        "exact checkpoints after the rebalance",
        || format!("{}\n{}", last.borrow(), logs(&both)),
        || {
            let expected = exact_translation(&topic, &committed);
            let got = remote_cluster_utils(&group);
            *last.borrow_mut() = format!(
                "last seen: RemoteClusterUtils {got:?}, exact {expected:?}, committed on the \
                 source {committed:?}, moved {moved:?}"
            );
            (got == expected).then_some(got)
        },
    );
    assert!(
        moved.iter().any(|p| committed.contains_key(&(*p as i32))),
        "the group committed no offset of a moved partition ({moved:?}, {committed:?})"
    );
    eprintln!(
        "after the rebalance (partitions {moved:?} moved): committed on the source {committed:?}, \
         RemoteClusterUtils {got:?}"
    );
    // What RemoteClusterUtils reads is exact (above). Right after a move, the new owner may
    // write a checkpoint by MM2's algorithm (behind the exact one, never ahead) until its
    // mapping covers the group's offset: counted and reported, not hidden.
    let rounds: Vec<String> = both
        .iter()
        .flat_map(|m| {
            m.strait
                .stderr()
                .lines()
                .filter(|l| l.contains("checkpoints written"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    let approximate = rounds
        .iter()
        .filter(|l| !l.contains("approximate=0"))
        .count();
    assert!(
        !rounds.is_empty(),
        "no checkpoints written\n{}",
        logs(&both)
    );
    eprintln!(
        "{} checkpoint rounds, {approximate} with an approximate checkpoint",
        rounds.len()
    );
    stop_all(vec![first, second]);
}

/// Issue 22 after a hand-over: a group behind (its position in history another member copied)
/// translates exactly once its partitions moved: the new owner reads the previous owner's
/// stored mapping before it translates (the members started before that history existed, so
/// only the hand-over can give it to them). Every checkpoint is exact, and RemoteClusterUtils
/// and the synced group offsets agree with the records.
#[test]
fn a_group_behind_translates_exactly_after_its_partitions_move() {
    use strait_tests::translation::{Oracle, commit_offsets};
    let tb = Testbed::get();
    let topic = unique("group-behind");
    let remote = format!("A.{topic}");
    create_topic(tb.source(), &topic, 6, &[]);
    let cfg = testbed_mm2_config(
        &topic,
        &format!(
            "{GROUP}emit.checkpoints.interval.seconds = 1\n\
             sync.group.offsets.enabled = true\n\
             sync.group.offsets.interval.seconds = 1\n\
             refresh.groups.interval.seconds = 1\n"
        ),
    );
    let members: Vec<Member> = (0..3).map(|_| Member::start(&cfg)).collect();
    let all: Vec<&Member> = members.iter().collect();
    wait_balanced(&all, 6);
    // Aborted transactions and markers: target offsets differ from source offsets.
    let spec = ["c30", "a10", "c25", "a5", "c40", "a8", "c35", "c20"]
        .repeat(3)
        .join(",");
    strait_tests::offsets_tool().run(
        &[
            "produce-tx",
            tb.source(),
            &topic,
            &unique("grp-txid"),
            &spec,
        ],
        None,
    );
    let oracle = eventually(
        90,
        "every committed record copied",
        || logs(&all),
        || {
            let o = Oracle::read(&topic, &remote);
            (0..6)
                .all(|p| {
                    o.source_offsets(p)
                        .iter()
                        .all(|x| o.try_exact(p, *x).is_some())
                })
                .then_some(o)
        },
    );
    let group = unique("behind-group");
    let at = |fraction: usize| -> Vec<(i32, i64)> {
        (0..6)
            .map(|p| {
                let offsets = oracle.source_offsets(p);
                (p, offsets[offsets.len() * fraction / 4] + 1)
            })
            .collect()
    };
    let wait_exact = |positions: &[(i32, i64)], members: &[&Member], what: &str| {
        let expected: BTreeMap<i32, i64> = positions
            .iter()
            .map(|(p, o)| (*p, oracle.exact(*p, *o)))
            .collect();
        let last = std::cell::RefCell::new(String::new());
        eventually(
            90,
            what,
            || format!("{}\n{}", last.borrow(), logs(members)),
            || {
                let checkpointed = remote_cluster_utils(&group);
                let synced: BTreeMap<i32, i64> =
                    strait_tests::translation::group_offsets(tb.target(), &group)
                        .into_iter()
                        .filter(|((t, _), _)| *t == remote)
                        .map(|((_, p), o)| (p, o))
                        .collect();
                *last.borrow_mut() = format!(
                    "last seen: checkpoints {checkpointed:?}, synced {synced:?}, exact {expected:?}"
                );
                (checkpointed == expected && synced == expected).then_some(())
            },
        );
        expected
    };
    // The group, behind, commits in the middle of the history; its owners translate it.
    commit_offsets(tb.source(), &topic, &[(group.clone(), at(2))]);
    let expected = wait_exact(&at(2), &all, "exact checkpoints from the first owners");
    assert!(
        at(2).iter().any(|(p, o)| expected[p] != *o),
        "the test needs target offsets that differ from the source's: {expected:?}"
    );

    // A member holding partitions leaves; its partitions move to the two others.
    let (leaving, rest) = pick_plain_member(&members);
    let moved: Vec<i64> = members[leaving].group().map(|g| g.3).unwrap_or_default();
    assert!(!moved.is_empty(), "the leaving member held no partition");
    members[leaving].strait.signal("TERM");
    wait_balanced(&rest, 6);
    // The group moves on, still in the old history: the new owners must translate there.
    commit_offsets(tb.source(), &topic, &[(group.clone(), at(3))]);
    wait_exact(&at(3), &rest, "exact checkpoints after the hand-over");
    for m in &rest {
        let log = m.strait.stderr();
        assert!(
            log.lines()
                .filter(|l| l.contains("checkpoints written"))
                .all(|l| l.contains("approximate=0")),
            "approximate checkpoints (partitions {moved:?} moved):\n{log}"
        );
    }
    let mut members = members;
    members
        .remove(leaving)
        .strait
        .wait(Duration::from_secs(30))
        .expect_code(0);
    stop_all(members);
}
