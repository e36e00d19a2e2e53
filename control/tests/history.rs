//! Exact offset translation over the whole retained history (issue 22), through the `strait`
//! binary against the test bed: the exact mapping is stored with the progress, so translation
//! stays exact after a SIGKILL between copying and storing progress, inside compaction gaps
//! and aborted transactions after a restart, and, for a partition with more runs than its
//! bound, exact in the newest history and approximate (labelled, never ahead) in the oldest.
//!
//! The oracle is the records themselves ([`Oracle`]): where a group that committed source
//! offset X must resume is the target offset of the first source record at or after X. Groups
//! are committed at chosen offsets with Kafka's consumer (`commit_offsets`), after strait
//! stopped, so only the stored mapping can answer exactly.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use strait_tests::strait::Strait;
use strait_tests::translation::{
    Oracle, Row, assert_checkpoints_exact, commit_offsets, config, consume, create_topic,
    group_offsets, produce_compacted_with_gaps, remote_translate, strait_run, strait_translate,
    wait_for_compaction_gaps,
};
use strait_tests::{Testbed, unique, verifiable_producer};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// `strait offsets translate` for `group`, as rows by partition.
fn translate(cfg: &Path, group: &str) -> (BTreeMap<i32, Row>, String) {
    let (rows, text) = strait_translate(STRAIT, cfg, group);
    (rows.into_iter().map(|r| (r.partition, r)).collect(), text)
}

/// One group per offset set: `(group, [(partition, offset)])`.
fn groups_at(prefix: &str, sets: &[Vec<(i32, i64)>]) -> Vec<(String, Vec<(i32, i64)>)> {
    sets.iter().map(|s| (unique(prefix), s.clone())).collect()
}

/// Every group's committed offsets translate exactly (`offsets translate`, no strait running).
fn assert_translated_exactly(cfg: &Path, oracle: &Oracle, groups: &[(String, Vec<(i32, i64)>)]) {
    for (group, offsets) in groups {
        let (rows, text) = translate(cfg, group);
        for (p, o) in offsets {
            let row = rows
                .get(p)
                .unwrap_or_else(|| panic!("no row for {p}:\n{text}"));
            assert_eq!(row.source_offset, *o, "{text}");
            assert_eq!(
                (row.precision.as_str(), row.target_offset),
                ("exact", Some(oracle.exact(*p, *o))),
                "group {group} at {p}:{o}\n{text}"
            );
        }
    }
}

/// The `(from, to)` of each partition crash recovery skipped, from the log line
/// `... from=X to=Y records=N "the target already held records ..."`.
fn recovered_stretches(log: &str, topic: &str) -> BTreeMap<i32, (i64, i64)> {
    let field = |l: &str, name: &str| -> Option<i64> {
        let (_, rest) = l.split_once(&format!(" {name}="))?;
        rest.split_whitespace().next()?.parse().ok()
    };
    log.lines()
        .filter(|l| l.contains("the target already held records replicated after"))
        .filter_map(|l| {
            let (_, rest) = l.split_once(&format!("partition={topic}-"))?;
            let p: i32 = rest.split_whitespace().next()?.parse().ok()?;
            Some((p, (field(l, "from")?, field(l, "to")?)))
        })
        .collect()
}

#[test]
fn translation_stays_exact_after_a_sigkill_between_copying_and_storing_progress() {
    let tb = Testbed::get();
    let topic = unique("hist-kill");
    let remote = format!("A.{topic}");
    create_topic(tb.source(), &topic, 2, &[]);
    // No checkpoint or group sync in the first run: it is killed before any.
    let quiet = config(
        &topic,
        "emit.checkpoints.interval.seconds = 600\nsync.group.offsets.enabled = false\n",
    );
    // 10 s of production; strait is killed in the middle of it, so the target holds records
    // copied after the last progress store (stored every second).
    let mut producer = verifiable_producer(tb.source(), &topic, 40_000, 4_000);
    std::thread::sleep(Duration::from_secs(1));
    let first = Strait::start(Path::new(STRAIT), &quiet, &["--shards", "2"]);
    // Killed once it copies, between two progress stores (every second).
    let deadline = Instant::now() + Duration::from_secs(60);
    while strait_tests::log::try_offsets(tb.target(), &remote)
        .is_none_or(|ends| ends.iter().map(|e| e.1).sum::<i64>() < 4_000)
    {
        assert!(
            Instant::now() < deadline,
            "strait copied nothing within 60 s:\n{}",
            first.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1_300));
    first.signal("KILL");
    let killed = first.wait(Duration::from_secs(10));
    assert_eq!(killed.code, None, "SIGKILL ends strait:\n{}", killed.stderr);
    assert!(producer.wait().expect("the producer runs").success());

    let log = strait_run(STRAIT, &quiet);
    let stretches = recovered_stretches(&log, &topic);
    assert!(
        !stretches.is_empty(),
        "the restart found nothing copied past the stored progress (no crash window):\n{log}"
    );
    let oracle = Oracle::read(&topic, &remote);
    // Offsets inside the stretch crash recovery skipped, at its edges, and before it.
    let mut sets: Vec<Vec<(i32, i64)>> = vec![Vec::new(); 4];
    for (p, (from, to)) in &stretches {
        assert!(to > from, "{p}: {from}..{to}");
        sets[0].push((*p, from + (to - from) / 2));
        sets[1].push((*p, *from));
        sets[2].push((*p, *to - 1));
        sets[3].push((*p, from / 2));
    }
    let groups = groups_at("hist-kill-g", &sets);
    commit_offsets(tb.source(), &topic, &groups);
    assert_translated_exactly(&quiet, &oracle, &groups);

    // A strait that checkpoints and syncs: the checkpoints, the synced offsets and
    // RemoteClusterUtils agree with the records, and the group resumes on the record after
    // the last one it had.
    let syncing = config(&topic, "sync.group.offsets.enabled = true\n");
    let log = strait_run(STRAIT, &syncing);
    assert_checkpoints_exact(&log);
    let (group, offsets) = &groups[0];
    let synced = group_offsets(tb.target(), group);
    let checkpointed = remote_translate(group);
    for (p, o) in offsets {
        let exact = oracle.exact(*p, *o);
        assert_eq!(synced.get(&(remote.clone(), *p)), Some(&exact), "{log}");
        assert_eq!(
            checkpointed.get(&(remote.clone(), *p)).map(|c| c.0),
            Some(exact)
        );
    }
    let resumed = consume(tb.target(), group, &remote, -1);
    for (p, o) in offsets {
        let first_read = resumed
            .iter()
            .find(|r| r.partition == *p)
            .expect("records after the group's position");
        assert_eq!(first_read.offset, oracle.exact(*p, *o));
        assert_eq!(Some(&first_read.value), oracle.value_at(*p, *o).as_ref());
    }
}

#[test]
fn translation_is_exact_inside_compaction_gaps_and_aborted_transactions_after_a_restart() {
    let tb = Testbed::get();
    let compacted = unique("hist-compact");
    let txn = unique("hist-txn");
    produce_compacted_with_gaps(&compacted);
    create_topic(tb.source(), &txn, 2, &[]);
    let tool = strait_tests::offsets_tool();
    tool.run(
        &[
            "produce-tx",
            tb.source(),
            &txn,
            &unique("hist-txid"),
            "c10,a6,c7,c3,a4,c12,a2,c9",
        ],
        None,
    );
    let records = wait_for_compaction_gaps(&compacted);
    let kept: Vec<i64> = records.iter().map(|r| r.offset).collect();
    let gaps: Vec<i64> = (0..*kept.last().expect("records"))
        .filter(|o| !kept.contains(o))
        .collect();
    let cfg = config(&format!("{compacted}|{txn}"), "");
    strait_run(STRAIT, &cfg);

    // Compacted: every source offset, in the gaps and in the runs, each its own group.
    let oracle = Oracle::read(&compacted, &format!("A.{compacted}"));
    let end = kept.last().copied().unwrap_or(0) + 2;
    let sets: Vec<Vec<(i32, i64)>> = (0..end).step_by(3).map(|o| vec![(0, o)]).collect();
    assert!(
        sets.iter().any(|s| gaps.contains(&s[0].1)),
        "no offset in a gap: {gaps:?}"
    );
    let groups = groups_at("hist-compact-g", &sets);
    commit_offsets(tb.source(), &compacted, &groups);
    assert_translated_exactly(&cfg, &oracle, &groups);

    // Transactions: the offsets of commit markers and of aborted records, and inside runs.
    let oracle = Oracle::read(&txn, &format!("A.{txn}"));
    let mut sets: Vec<Vec<(i32, i64)>> = Vec::new();
    for p in 0..2 {
        let kept = oracle.source_offsets(p);
        let last = *kept.last().expect("records");
        let not_copied: Vec<i64> = (0..=last + 1).filter(|o| !kept.contains(o)).collect();
        assert!(
            not_copied.len() > 3,
            "{p}: markers and aborts {not_copied:?}"
        );
        for o in not_copied.iter().step_by(2).chain(kept.iter().step_by(5)) {
            sets.push(vec![(p, *o)]);
        }
    }
    let groups = groups_at("hist-txn-g", &sets);
    commit_offsets(tb.source(), &txn, &groups);
    assert_translated_exactly(&cfg, &oracle, &groups);
}

#[test]
fn a_partition_past_its_bound_keeps_its_newest_history_exact_and_labels_the_rest() {
    let tb = Testbed::get();
    let topic = unique("hist-bound");
    create_topic(tb.source(), &topic, 1, &[]);
    // 400 transactions of 3 records: each commit marker ends a run, 400 runs against a bound
    // of 256.
    let spec = vec!["c3"; 400].join(",");
    strait_tests::offsets_tool().run(
        &[
            "produce-tx",
            tb.source(),
            &topic,
            &unique("hist-txid"),
            &spec,
        ],
        None,
    );
    let cfg = config(&topic, "strait.mapping.max.runs.per.partition = 256\n");
    strait_run(STRAIT, &cfg);
    let oracle = Oracle::read(&topic, &format!("A.{topic}"));
    // Transaction i's records are at 4i..4i+2, its marker at 4i+3.
    let at = |txn: i64, k: i64| 4 * txn + k;
    let newest: Vec<Vec<(i32, i64)>> = [399, 380, 350]
        .iter()
        .flat_map(|t| [at(*t, 1), at(*t, 3)])
        .map(|o| vec![(0, o)])
        .collect();
    let groups = groups_at("hist-bound-new", &newest);
    commit_offsets(tb.source(), &topic, &groups);
    assert_translated_exactly(&cfg, &oracle, &groups);

    // The oldest history was thinned: each answer is exact or approximate, never past the
    // exact one, and an approximate one says how far back it may be.
    let oldest: Vec<Vec<(i32, i64)>> = (1..120).step_by(7).map(|t| vec![(0, at(t, 3))]).collect();
    let groups = groups_at("hist-bound-old", &oldest);
    commit_offsets(tb.source(), &topic, &groups);
    let mut approximate = 0;
    for (group, offsets) in &groups {
        let (rows, text) = translate(&cfg, group);
        let (p, o) = offsets[0];
        let row = &rows[&p];
        let exact = oracle.exact(p, o);
        let got = row.target_offset.expect("translated");
        match row.precision.as_str() {
            "exact" => assert_eq!(got, exact, "{text}"),
            "approximate" => {
                approximate += 1;
                assert!(got <= exact, "ahead of the exact {exact}:\n{text}");
                let bound = row.max_reread.expect("a bound on what is re-read");
                assert!(
                    exact - got <= bound,
                    "re-reads {} > {bound}:\n{text}",
                    exact - got
                );
            }
            other => panic!("{other}:\n{text}"),
        }
    }
    assert!(approximate > 0, "thinning left every old answer exact");
}
