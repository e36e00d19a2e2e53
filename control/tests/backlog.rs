//! A shard whose command channel is full must not freeze the control loop (issue 25, item 3).
//! The control thread also serves the REST API and runs the group's heartbeats: a blocking
//! send into a full channel froze all three, and a member that stops heartbeating is fenced.
//! Here one shard gets more partitions than its channel holds (the channel lowered to one
//! command by the test knob, as 1 024 commands fill it in production), in a group: the API
//! answers within the loop's own bound all along, the member is never fenced, and every
//! partition is copied.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strait_control::run::{DUTY_DEADLINE, TEST_COMMAND_CHANNEL_ENV, TICK};
use strait_tests::api::{api_addr, produce_round_robin};
use strait_tests::log::{create_topic, offsets, try_offsets};
use strait_tests::strait::Strait;
use strait_tests::{Testbed, testbed_mm2_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// More than the shard's channel holds (one command, see below), so that assigning them takes
/// the shard about this many ticks (25 ms): some 10 s during which commands wait.
const PARTITIONS: i32 = 400;

/// The group's session: a control thread frozen longer than this loses its membership.
const SESSION: Duration = Duration::from_secs(6);

/// The longest an API answer may take: the control loop turns every [`TICK`] and lets one
/// duty's cluster work hold it at most [`DUTY_DEADLINE`] (and the API is served while a duty
/// awaits its cluster): later means the control thread was blocked.
fn answer_bound() -> Duration {
    DUTY_DEADLINE + 10 * TICK
}

/// One GET; how long the answer took (`None` when none came within 60 s) and its body.
fn timed_get(addr: &str, path: &str) -> (Option<Duration>, String) {
    let t = Instant::now();
    let Ok(mut s) = TcpStream::connect(addr) else {
        return (None, String::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    match s.read_to_string(&mut out) {
        Ok(_) if !out.is_empty() => (
            Some(t.elapsed()),
            out.split_once("\r\n\r\n")
                .map_or("", |(_, b)| b)
                .to_string(),
        ),
        _ => (None, out),
    }
}

#[test]
fn a_full_shard_channel_never_freezes_the_api_or_the_group_heartbeats() {
    let tb = Testbed::get();
    let topic = unique("backlog");
    create_topic(tb.source(), &topic, PARTITIONS, &[]);
    // Records in most partitions, with Kafka's console producer (its round-robin partitioner
    // skips a few partitions when a batch is started).
    produce_round_robin(&topic, "r", 2 * PARTITIONS as usize);
    let ends = || -> Vec<i64> { offsets(tb.source(), &topic).iter().map(|o| o.1).collect() };
    let produced: i64 = ends().iter().sum();
    assert!(produced >= i64::from(PARTITIONS), "{produced} records");
    let cfg = testbed_mm2_config(
        &topic,
        &format!(
            "strait.shards = 1\n\
             strait.group.id = {}\n\
             strait.group.session.timeout.ms = {}\n\
             strait.group.heartbeat.interval.ms = 1000\n\
             strait.group.rebalance.timeout.ms = 10000\n\
             strait.api.listen = 127.0.0.1:0\n",
            unique("backlog"),
            SESSION.as_millis()
        ),
    );
    let strait = Strait::start_with_env(
        Path::new(STRAIT),
        &cfg,
        &[],
        &[(TEST_COMMAND_CHANNEL_ENV, "1")],
    );
    let api = api_addr(&strait);

    // /health/live, every 50 ms, until the partitions are copied: the slowest answer.
    let done = Arc::new(AtomicBool::new(false));
    let poller = {
        let (api, done) = (api.clone(), done.clone());
        std::thread::spawn(move || {
            let (mut worst, mut answers) = (Duration::ZERO, 0u32);
            while !done.load(Ordering::Relaxed) {
                let took = timed_get(&api, "/health/live").0.unwrap_or(Duration::MAX);
                worst = worst.max(took);
                answers += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            (worst, answers)
        })
    };

    // Meanwhile: the most commands seen waiting for the shard (the backlog really formed),
    // the group's generations, and whether every partition is copied.
    let remote = format!("A.{topic}");
    let deadline = Instant::now() + Duration::from_secs(90);
    let (mut most_waiting, mut generations) = (0u64, std::collections::BTreeSet::new());
    loop {
        if let (_, body) = timed_get(&api, "/status")
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&body)
        {
            for s in v["shards"].as_array().into_iter().flatten() {
                most_waiting = most_waiting.max(s["commands_waiting"].as_u64().unwrap_or(0));
            }
            if let Some(g) = v["group"]["generation"].as_i64().filter(|&g| g > 0) {
                generations.insert(g);
            }
        }
        let copied =
            try_offsets(tb.target(), &remote).is_some_and(|o| o.iter().map(|o| o.1).eq(ends()));
        if copied {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every partition was copied within 90 s\n{}",
            strait.stderr()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    done.store(true, Ordering::Relaxed);
    let (worst, answers) = poller.join().expect("the poller runs");
    let log = strait.stderr();
    eprintln!(
        "{PARTITIONS} partitions on one shard, {produced} records: {answers} /health/live answers, the slowest in {worst:?}; \
         at most {most_waiting} commands waited; generations {generations:?}"
    );
    assert!(
        worst <= answer_bound(),
        "/health/live took {worst:?} (bound {:?}): the control thread was blocked\n{log}",
        answer_bound()
    );
    assert!(
        most_waiting > 0,
        "no command ever waited for the shard: the test did not fill its channel\n{log}"
    );
    // The heartbeats went on: one generation, never a lapse or a fencing.
    assert_eq!(generations.len(), 1, "{generations:?}\n{log}");
    assert!(
        !log.contains("local session deadline") && !log.contains("fenced this member"),
        "{log}"
    );
    assert!(!log.contains("has not taken commands"), "{log}");
    strait.signal("TERM");
    strait.wait(Duration::from_secs(30)).expect_code(0);
}
