//! Offset translation end to end on the test bed: a consumer group consumes part of a source
//! topic with Kafka's own client, `strait run --until-caught-up` replicates, checkpoints and
//! syncs the group, and the same group on the target resumes at exactly the next record.
//! Kafka's own `RemoteClusterUtils`, `kafka-consumer-groups` and MM2's `OffsetSyncStore` read
//! what strait wrote. Also: groups active on the target are left alone, offsets never move
//! backwards, and a restarted strait translates from the offset-syncs topic.
//!
//! The Java side is `tests/java/StraitOffsetsTool.java`.
#![forbid(unsafe_code)]

use strait_tests::translation::{
    ActiveMember, assert_checkpoints_exact, assert_failover, by_partition, committed, config,
    consume, create_topic, end_offsets, group_offsets, produce, produce_compacted_with_gaps,
    read_all, remote_translate, reset_group_offsets, strait_run, strait_translate,
    wait_for_compaction_gaps,
};
use strait_tests::{JavaProgram, Testbed, kafka_tool_ok, unique};

/// The `strait` binary under test.
const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

fn tool() -> &'static JavaProgram {
    strait_tests::offsets_tool()
}

/// MM2's own `OffsetSyncStore.translateDownstream` over the offset syncs strait wrote.
fn mm2_translate(
    bootstrap: &str,
    syncs_topic: &str,
    group: &str,
    topic: &str,
    partition: i32,
    offsets: &[i64],
) -> Vec<Option<i64>> {
    let mut args: Vec<String> = [
        "mm2-translate",
        bootstrap,
        syncs_topic,
        group,
        topic,
        &partition.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(offsets.iter().map(|o| o.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = tool().run(&args, None);
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split('\t').nth(1).and_then(|v| v.parse().ok()))
        .collect()
}

fn describe_topic(bootstrap: &str, topic: &str) -> String {
    kafka_tool_ok(
        "kafka-topics",
        &[
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--topic",
            topic,
        ],
        None,
    )
}

#[test]
fn failover_resumes_at_the_next_record() {
    let tb = Testbed::get();
    let topic = unique("tr-plain");
    let remote = format!("A.{topic}");
    let group = unique("tr-group");
    create_topic(tb.source(), &topic, 3, &[]);
    produce(&topic, 600, "v", 600, 1);
    let first = consume(tb.source(), &group, &topic, 250);
    assert_eq!(first.len(), 250);
    let source_committed = committed(&first);

    let cfg = config(&topic, "sync.group.offsets.enabled = true\n");
    let log = strait_run(STRAIT, &cfg);
    assert!(
        log.contains(&format!("group {group} (target state absent)")),
        "no group-sync report for {group}:\n{log}"
    );

    // The internal topics MM2 readers need: offset syncs on the source (the default location),
    // checkpoints on the target; one partition each, compacted.
    for (bootstrap, t) in [
        (tb.source(), "mm2-offset-syncs.B.internal"),
        (tb.target(), "A.checkpoints.internal"),
    ] {
        let d = describe_topic(bootstrap, t);
        assert!(d.contains("PartitionCount: 1"), "{d}");
        assert!(d.contains("cleanup.policy=compact"), "{d}");
    }

    assert_checkpoints_exact(&log);

    // A plain topic copied whole lands at the same offsets: exact translation is the identity.
    let (rows, text) = strait_translate(STRAIT, &cfg, &group);
    assert_eq!(rows.len(), source_committed.len(), "{text}");
    for r in &rows {
        assert_eq!(r.topic, topic);
        assert_eq!(r.target_topic, remote);
        assert_eq!(r.source_offset, source_committed[&r.partition], "{text}");
        assert_eq!(r.target_offset, Some(r.source_offset), "{text}");
        // Stopped, strait answers from its checkpoints (exact at the end of a partition).
        assert!(
            ["exact", "checkpoint"].contains(&r.precision.as_str()),
            "{text}"
        );
    }

    // Kafka's own tools see what strait committed and checkpointed.
    let target_offsets = group_offsets(tb.target(), &group);
    let remote_offsets = remote_translate(&group);
    for (p, offset) in &source_committed {
        let key = (remote.clone(), *p);
        assert_eq!(
            target_offsets.get(&key),
            Some(offset),
            "kafka-consumer-groups on the target"
        );
        assert_eq!(
            remote_offsets.get(&key),
            Some(&(*offset, "strait-test".to_string())),
            "RemoteClusterUtils.translateOffsets"
        );
        // MM2's own translation from strait's offset syncs is valid (never past the group)
        // and never better than strait's exact one.
        let mm2 = mm2_translate(
            tb.source(),
            "mm2-offset-syncs.B.internal",
            &group,
            &topic,
            *p,
            &[*offset],
        );
        let mm2 = mm2[0].expect("MM2 translates from strait's offset syncs");
        assert!(mm2 <= *offset, "MM2 translated {offset} to {mm2}");
    }
    assert_eq!(
        target_offsets.len(),
        source_committed.len(),
        "{target_offsets:?}"
    );

    let second = consume(tb.target(), &group, &remote, -1);
    let target_all = read_all(tb.target(), &remote);
    assert_eq!(target_all.len(), 600);
    assert_eq!(first.len() + second.len(), 600);
    assert_failover(&first, &second, &target_all);
    // And the copy is the source, partition by partition.
    assert_eq!(
        by_partition(&read_all(tb.source(), &topic)),
        by_partition(&target_all)
    );
}

#[test]
fn failover_with_transactions_and_aborts() {
    let tb = Testbed::get();
    let topic = unique("tr-tx");
    let remote = format!("A.{topic}");
    let group = unique("tr-group");
    let group_all = unique("tr-group-all");
    create_topic(tb.source(), &topic, 2, &[]);
    tool().run(
        &[
            "produce-tx",
            tb.source(),
            &topic,
            &unique("tr-txid"),
            "c10,a6,c7,c3,a4,c12,a2,c9",
        ],
        None,
    );
    // Ends inside a committed transaction on one of the partitions.
    let first = consume(tb.source(), &group, &topic, 17);
    assert_eq!(first.len(), 17);
    let everything = consume(tb.source(), &group_all, &topic, -1);
    assert_eq!(everything.len(), 41);
    assert!(everything.iter().all(|r| r.value.starts_with("c-")));

    let cfg = config(&topic, "sync.group.offsets.enabled = true\n");
    let log = strait_run(STRAIT, &cfg);
    assert_checkpoints_exact(&log);
    let target_all = read_all(tb.target(), &remote);
    assert_eq!(
        target_all.len(),
        41,
        "aborted records and markers are not copied"
    );
    assert!(target_all.iter().all(|r| r.value.starts_with("c-")));

    // Markers and aborted records make target offsets smaller than source offsets, and the
    // translation still is exact.
    let (rows, text) = strait_translate(STRAIT, &cfg, &group);
    assert!(!rows.is_empty(), "{text}");
    assert!(
        rows.iter()
            .all(|r| ["exact", "checkpoint"].contains(&r.precision.as_str())),
        "{text}"
    );
    assert!(
        rows.iter()
            .any(|r| r.target_offset != Some(r.source_offset)),
        "{text}"
    );
    // A group at the very end (past the last commit marker) translates exactly to the end.
    let ends = end_offsets(tb.target(), &remote);
    let (rows_all, text_all) = strait_translate(STRAIT, &cfg, &group_all);
    assert_eq!(rows_all.len(), 2, "{text_all}");
    for r in &rows_all {
        assert_eq!(r.precision, "exact", "{text_all}");
        assert_eq!(r.target_offset, Some(ends[&r.partition]), "{text_all}");
    }

    let second = consume(tb.target(), &group, &remote, -1);
    assert_failover(&first, &second, &target_all);
    assert!(consume(tb.target(), &group_all, &remote, -1).is_empty());
}

#[test]
fn failover_across_compaction_gaps() {
    let tb = Testbed::get();
    let topic = unique("tr-compact");
    let remote = format!("A.{topic}");
    let group = unique("tr-group");
    produce_compacted_with_gaps(&topic);
    let source = wait_for_compaction_gaps(&topic);
    assert!(source.len() < 70, "{source:?}");
    let first = consume(tb.source(), &group, &topic, (source.len() / 2) as i64);

    let cfg = config(&topic, "sync.group.offsets.enabled = true\n");
    let log = strait_run(STRAIT, &cfg);
    assert_checkpoints_exact(&log);
    let target_all = read_all(tb.target(), &remote);
    assert_eq!(by_partition(&target_all), by_partition(&source));
    let (rows, text) = strait_translate(STRAIT, &cfg, &group);
    assert_eq!(rows.len(), 1, "{text}");
    // From the stored mapping, without a running strait.
    assert_eq!(rows[0].precision, "exact", "{text}");
    // The target is dense: the group's position there is the number of records it read.
    assert_eq!(rows[0].target_offset, Some(first.len() as i64), "{text}");
    assert_ne!(rows[0].source_offset, first.len() as i64, "{text}");

    let second = consume(tb.target(), &group, &remote, -1);
    assert_failover(&first, &second, &target_all);
}

#[test]
fn active_groups_are_left_alone_and_offsets_never_move_backwards() {
    let tb = Testbed::get();
    let topic = unique("tr-safety");
    let remote = format!("A.{topic}");
    let group = unique("tr-group");
    let busy = unique("tr-busy");
    create_topic(tb.source(), &topic, 2, &[]);
    produce(&topic, 100, "v", 100, 1);
    // Both groups read 60 of the 100 records (50 per partition).
    let mut first = consume(tb.source(), &group, &topic, 60);
    first.sort_by_key(|r| (r.partition, r.offset));
    assert_eq!(first.len(), 60);
    consume(tb.source(), &busy, &topic, 60);
    let source_committed = committed(&first);

    // Replicate without group sync, then put the target group at the end of partition 0, where
    // no translation can be ahead of it.
    strait_run(STRAIT, &config(&topic, ""));
    reset_group_offsets(
        tb.target(),
        &group,
        &format!("{remote}:0"),
        &["--to-offset", "50"],
    );

    // A member of `busy` consumes on the target while strait syncs.
    let member = ActiveMember::start(tb.target(), &busy, &remote);
    let cfg = config(&topic, "sync.group.offsets.enabled = true\n");
    let log = strait_run(STRAIT, &cfg);
    let member_out = member.finish();
    assert!(member_out.contains("ASSIGNED"), "{member_out}");

    assert!(
        log.contains(&format!("group {busy} (target state Stable): 0 committed")),
        "{log}"
    );
    assert!(
        group_offsets(tb.target(), &busy).is_empty(),
        "strait committed to an active group"
    );

    // Partition 0 stays ahead, partition 1 gets the translation.
    let offsets = group_offsets(tb.target(), &group);
    assert_eq!(offsets.get(&(remote.clone(), 0)), Some(&50));
    assert_eq!(
        offsets.get(&(remote.clone(), 1)),
        Some(&source_committed[&1])
    );
    if source_committed.get(&0).is_some_and(|o| *o < 50) {
        assert!(log.contains("target offset 50 is not behind"), "{log}");
    }

    // Now idle, `busy` is synced.
    strait_run(STRAIT, &cfg);
    let busy_offsets = group_offsets(tb.target(), &busy);
    assert_eq!(busy_offsets.len(), 2, "{busy_offsets:?}");

    // The source group rewinds: the checkpoint follows (MM2 propagates upstream rewinds), the
    // target group's offsets do not move backwards.
    reset_group_offsets(tb.source(), &group, &topic, &["--to-earliest"]);
    strait_run(STRAIT, &cfg);
    let checkpoints = remote_translate(&group);
    assert_eq!(checkpoints.get(&(remote.clone(), 1)).map(|c| c.0), Some(0));
    assert_eq!(group_offsets(tb.target(), &group), offsets);
}

/// The issue-22 scenario: a group behind, committed while strait was stopped, translates
/// exactly after a restart from the stored mapping (not from the thinned offset syncs):
/// `offsets translate` without a running strait, the checkpoint, the synced group offset and
/// `RemoteClusterUtils` all give the target offset of the first record the group had not
/// consumed, and a consumer on the target starts exactly there.
#[test]
fn restart_translates_exactly_from_the_stored_mapping() {
    let tb = Testbed::get();
    let topic = unique("tr-restart");
    let remote = format!("A.{topic}");
    let group = unique("tr-group");
    let group_end = unique("tr-group-end");
    create_topic(tb.source(), &topic, 1, &[]);
    // Foreign records on the target before strait copies: target offsets are source offsets
    // + 7, so an identity answer would be wrong.
    create_topic(tb.target(), &remote, 1, &[]);
    strait_tests::offsets_tool().run(
        &["produce", tb.target(), &remote, "7", "foreign", "7"],
        None,
    );
    produce(&topic, 500, "v", 500, 1);
    // Offset syncs on the target this time.
    let extra = "offset-syncs.topic.location = target\noffset.lag.max = 10\n";
    strait_run(STRAIT, &config(&topic, extra));
    let d = describe_topic(tb.target(), "mm2-offset-syncs.A.internal");
    assert!(
        d.contains("PartitionCount: 1") && d.contains("cleanup.policy=compact"),
        "{d}"
    );

    // The groups commit after strait stopped: strait never saw these offsets while it ran.
    let first = consume(tb.source(), &group, &topic, 250);
    assert_eq!(first.len(), 250);
    assert_eq!(consume(tb.source(), &group_end, &topic, -1).len(), 500);
    let cfg = config(
        &topic,
        &format!("{extra}sync.group.offsets.enabled = true\n"),
    );
    let (rows, text) = strait_translate(STRAIT, &cfg, &group);
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(rows[0].precision, "exact", "{text}");
    assert_eq!(rows[0].target_offset, Some(257), "{text}");
    // MM2's own store, from the same syncs, is never past it (and not better).
    let mm2 = mm2_translate(
        tb.target(),
        "mm2-offset-syncs.A.internal",
        &group,
        &topic,
        0,
        &[250],
    );
    assert!(mm2[0].is_some_and(|m| m <= 257), "MM2: {mm2:?}\n{text}");
    let (rows_end, text_end) = strait_translate(STRAIT, &cfg, &group_end);
    assert_eq!(rows_end[0].target_offset, Some(507), "{text_end}");
    assert_eq!(rows_end[0].precision, "exact", "{text_end}");

    // The restarted strait (nothing new to copy) checkpoints and syncs the same translation.
    let log = strait_run(STRAIT, &cfg);
    assert!(log.contains("exact offset mappings restored"), "{log}");
    assert_checkpoints_exact(&log);
    let offsets = group_offsets(tb.target(), &group);
    assert_eq!(offsets.get(&(remote.clone(), 0)), Some(&257), "{log}");
    assert_eq!(
        remote_translate(&group)
            .get(&(remote.clone(), 0))
            .map(|c| c.0),
        Some(257)
    );
    assert_eq!(
        group_offsets(tb.target(), &group_end).get(&(remote.clone(), 0)),
        Some(&507)
    );

    // The group resumes on the target with the record after the last one it read: nothing
    // skipped, nothing read twice.
    let second = consume(tb.target(), &group, &remote, -1);
    assert_eq!(second.first().map(|r| r.offset), Some(257));
    assert_eq!(second.first().map(|r| r.value.as_str()), Some("v-250"));
    assert_eq!(second.len(), 250);
}
