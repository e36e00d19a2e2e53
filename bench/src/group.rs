//! `strait-bench group`: strait as a group of instances on the test bed, under a fixed-rate
//! load: how long the group takes to be balanced again when a member joins, leaves cleanly
//! (SIGTERM) and is killed (SIGKILL), and how long each partition's copy stalls meanwhile.
//!
//! A stall is measured from outside, as a user sees it: every 100 ms the source's and the
//! remote topic's log ends are read; a partition is stalled while the source holds records it
//! has not copied and its remote end does not move. The rebalance time is from the event to
//! every member's `/status` showing one stable generation of the expected size with each
//! partition held by exactly one member.
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use strait_control::cluster::{Cluster, IsolationLevel, OffsetSpec, TopicPartition};
use strait_dataplane::batch::Compression;
use strait_dataplane::io::IoBackend;

use crate::kafka;
use crate::payload::RecordShape;
use crate::producer::{self, ProduceSpec};
use crate::replicator::{self, ConfigParams, Tool};

/// How often the log ends are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// How long a member may take to print its API address.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the group may take to be balanced after an event.
const BALANCE_TIMEOUT: Duration = Duration::from_secs(120);

/// What to measure.
#[derive(Debug, Clone, Serialize)]
pub struct GroupSpec {
    /// Members at the largest (joins go from `instances - 1` to `instances`).
    pub instances: u32,
    pub partitions: u32,
    /// Records per second, all partitions together.
    pub rate: f64,
    pub value_bytes: usize,
    /// How long the load runs after each event's rebalance, before the next event.
    pub settle_s: u64,
    pub session_timeout_ms: u32,
    pub heartbeat_interval_ms: u32,
    #[serde(skip)]
    pub strait: PathBuf,
    #[serde(skip)]
    pub work_dir: PathBuf,
    pub source: String,
    pub target: String,
    #[serde(skip)]
    pub backend: IoBackend,
}

/// One event and what it cost.
#[derive(Debug, Clone, Serialize)]
pub struct EventResult {
    /// `join`, `leave` (SIGTERM) or `kill` (SIGKILL).
    pub event: String,
    pub members_before: u32,
    pub members_after: u32,
    /// Event → the group balanced and stable again, seconds.
    pub rebalance_s: f64,
    /// The longest stall of any partition in the event's window, seconds.
    pub max_stall_s: f64,
    /// Partitions that stalled longer than a second.
    pub partitions_stalled_over_1s: u32,
    /// The longest stall of each partition, seconds.
    pub stall_s: Vec<f64>,
}

/// A whole `strait-bench group` run.
#[derive(Debug, Clone, Serialize)]
pub struct GroupResult {
    pub spec: GroupSpec,
    pub events: Vec<EventResult>,
    pub produced: u64,
    /// Source records not on the target at the end (must be 0).
    pub missing: u64,
    /// Target records beyond the source's (duplicates).
    pub extra: u64,
}

/// One member process.
struct Member {
    child: Child,
    api: String,
    log: PathBuf,
}

impl Member {
    fn start(strait: &Path, config: &Path, log: PathBuf) -> Result<Member> {
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(strait)
            .args(["run", "--config"])
            .arg(config)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", strait.display()))?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(api) = text
                .lines()
                .find(|l| l.contains("REST API and /metrics listening"))
                .and_then(|l| l.split_once("address=")?.1.split_whitespace().next())
            {
                return Ok(Member {
                    child,
                    api: api.to_string(),
                    log,
                });
            }
            if Instant::now() > deadline {
                bail!(
                    "no API address in {} within {START_TIMEOUT:?}",
                    log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status();
    }

    /// `(generation, members, partitions of `topic` held)` when this member's group is stable.
    fn view(&self, topic: &str) -> Option<(i64, usize, Vec<i64>)> {
        let v = http_get_json(&self.api, "/status")?;
        let g = &v["group"];
        if g["state"] != "stable" {
            return None;
        }
        let parts = v["flows"][0]["partitions"]
            .as_array()?
            .iter()
            .filter(|p| p["topic"] == topic)
            .filter_map(|p| p["partition"].as_i64())
            .collect();
        Some((
            g["generation"].as_i64()?,
            g["members"].as_array()?.len(),
            parts,
        ))
    }

    fn wait(mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        bail!(
            "member did not stop within {timeout:?}; log {}",
            self.log.display()
        )
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` on a member's API, through `strait ctl`'s client.
fn http_get_json(addr: &str, path: &str) -> Option<serde_json::Value> {
    let client = strait_control::commands::ctl::Client {
        addr: addr.to_string(),
        token: None,
        tls: None,
    };
    client.call("GET", path, None).ok()
}

/// Waits until every member sees one stable generation of `members.len()` members and the
/// partitions of `topic` are each held once.
fn wait_balanced(members: &[Member], topic: &str, partitions: usize) -> Result<()> {
    let deadline = Instant::now() + BALANCE_TIMEOUT;
    loop {
        let all: Vec<_> = members.iter().map(|m| m.view(topic)).collect();
        let views: Option<Vec<_>> = all.iter().cloned().collect();
        if Instant::now() > deadline {
            bail!("the group was not balanced within {BALANCE_TIMEOUT:?}: members see {all:?}");
        }
        if let Some(views) = views {
            let generation = views[0].0;
            let held: Vec<i64> = views.iter().flat_map(|v| v.2.clone()).collect();
            let distinct: BTreeSet<i64> = held.iter().copied().collect();
            if views
                .iter()
                .all(|v| v.0 == generation && v.1 == members.len())
                && held.len() == partitions
                && distinct.len() == partitions
            {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One sample of every partition's log ends.
struct Sample {
    at: Instant,
    source: Vec<i64>,
    target: Vec<i64>,
}

async fn ends(cluster: &Cluster, topic: &str, partitions: u32) -> Option<Vec<i64>> {
    let tps: Vec<TopicPartition> = (0..partitions as i32)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    let got = cluster
        .list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
        .await;
    tps.iter()
        .map(|tp| got.get(tp).and_then(|r| r.as_ref().ok()).copied())
        .collect()
}

/// Samples both ends until `stop`; returns the samples.
fn sample_ends(
    spec: &GroupSpec,
    topic: String,
    remote: String,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Vec<Sample>>> {
    let (source, target) = (spec.source.clone(), spec.target.clone());
    let (partitions, backend) = (spec.partitions, spec.backend);
    Ok(std::thread::Builder::new()
        .name("ends".into())
        .spawn(move || {
            let mut out = Vec::new();
            // The clients belong to this thread's runtime.
            let (Ok(source), Ok(target)) = (
                kafka::admin("source", &source, backend),
                kafka::admin("target", &target, backend),
            ) else {
                return out;
            };
            let _ = strait_dataplane::io::block_on(backend, async {
                while !stop.load(Ordering::Relaxed) {
                    let s = ends(&source, &topic, partitions).await;
                    let t = ends(&target, &remote, partitions).await;
                    if let (Some(source), Some(target)) = (s, t) {
                        out.push(Sample {
                            at: Instant::now(),
                            source,
                            target,
                        });
                    }
                    tokio::time::sleep(SAMPLE_EVERY).await;
                }
            });
            out
        })?)
}

/// The longest stall of each partition between `from` and `until`.
fn stalls(samples: &[Sample], from: Instant, until: Instant) -> Vec<Duration> {
    let window: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.at >= from && s.at <= until)
        .collect();
    let Some(first) = window.first() else {
        return Vec::new();
    };
    let n = first.target.len();
    (0..n)
        .map(|p| {
            let (mut end, mut since, mut worst) = (first.target[p], first.at, Duration::ZERO);
            for s in &window {
                if s.target[p] != end || s.source[p] <= s.target[p] {
                    end = s.target[p];
                    since = s.at;
                }
                worst = worst.max(s.at.saturating_duration_since(since));
            }
            worst
        })
        .collect()
}

/// Runs the events: start `instances - 1` members, then a join, a clean leave and a kill.
#[allow(clippy::too_many_lines)] // one measured sequence, step by step
pub fn run(spec: &GroupSpec) -> Result<GroupResult> {
    if spec.instances < 2 {
        bail!("--instances must be at least 2 (a join and a leave need two members)");
    }
    std::fs::create_dir_all(&spec.work_dir)?;
    let id = crate::run::run_id();
    let topic = format!("bench-group-{id}");
    let (src_alias, dst_alias) = (format!("src{id}"), format!("dst{id}"));
    let remote = replicator::remote_topic(&src_alias, &topic);
    let source_admin = kafka::admin("source", &spec.source, spec.backend)?;
    strait_dataplane::io::block_on(spec.backend, async {
        kafka::create_topic(&source_admin, &topic, spec.partitions as i32, 1, &[]).await
    })??;
    let params = ConfigParams {
        source_alias: src_alias,
        target_alias: dst_alias,
        source_bootstrap: spec.source.clone(),
        target_bootstrap: spec.target.clone(),
        topic: topic.clone(),
        codec: Compression::None,
        mm2_tasks: 1,
        mm2_linger_ms: 0,
        replication_factor: 1,
        extra: vec![
            ("strait.api.listen".into(), "127.0.0.1:0".into()),
            (
                "strait.group.session.timeout.ms".into(),
                spec.session_timeout_ms.to_string(),
            ),
            (
                "strait.group.heartbeat.interval.ms".into(),
                spec.heartbeat_interval_ms.to_string(),
            ),
        ],
    };
    let config = spec.work_dir.join("strait.properties");
    std::fs::write(&config, replicator::config_text(Tool::Strait, &params))?;
    let log = |k: usize| spec.work_dir.join(format!("member-{k}.log"));

    let partitions = spec.partitions as usize;
    let mut members = Vec::new();
    for k in 0..(spec.instances - 1) as usize {
        members.push(Member::start(&spec.strait, &config, log(k))?);
    }
    wait_balanced(&members, &topic, partitions)?;

    // The load runs from now until the last event settled.
    let settle = Duration::from_secs(spec.settle_s);
    let produce = ProduceSpec {
        bootstrap: spec.source.clone(),
        topic: topic.clone(),
        // Until stopped after the last event.
        records: u64::MAX >> 2,
        shape: RecordShape::new(spec.value_bytes, 0, 0, 0),
        codec: Compression::None,
        batch_bytes: 16 << 10,
        linger_ms: 5,
        rate: Some(spec.rate),
        acks: -1,
        max_in_flight: 5,
        max_request_bytes: 4 << 20,
        warmup: false,
        progress: false,
        backend: spec.backend,
    };
    let stop_load = Arc::new(AtomicBool::new(false));
    let backend = spec.backend;
    let generator = {
        let stop = stop_load.clone();
        std::thread::Builder::new()
            .name("generator".into())
            .spawn(move || {
                strait_dataplane::io::block_on(backend, producer::produce(&produce, Some(stop)))
            })?
    };
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let sampler = sample_ends(spec, topic.clone(), remote.clone(), stop_sampling.clone())?;
    std::thread::sleep(settle);

    let mut events: Vec<(String, u32, u32, Instant, Duration)> = Vec::new();
    let mut event = |name: &str,
                     members: &mut Vec<Member>,
                     act: &dyn Fn(&mut Vec<Member>) -> Result<()>|
     -> Result<()> {
        let before = members.len() as u32;
        let at = Instant::now();
        act(members)?;
        wait_balanced(members, &topic, partitions)?;
        let took = at.elapsed();
        eprintln!(
            "strait-bench: {name}: {before} -> {} members, balanced after {:.2} s",
            members.len(),
            took.as_secs_f64()
        );
        events.push((name.to_string(), before, members.len() as u32, at, took));
        std::thread::sleep(settle);
        Ok(())
    };
    let next = members.len();
    event("join", &mut members, &|m| {
        m.push(Member::start(&spec.strait, &config, log(next))?);
        Ok(())
    })?;
    event("leave", &mut members, &|m| {
        let leaving = m.remove(0);
        leaving.signal("TERM");
        leaving.wait(Duration::from_secs(30))
    })?;
    event("kill", &mut members, &|m| {
        let killed = m.remove(0);
        killed.signal("KILL");
        drop(killed);
        Ok(())
    })?;
    // Generation stops, then the target catches up.
    stop_load.store(true, Ordering::Relaxed);
    let produced = match generator.join() {
        Ok(r) => r??.records,
        Err(_) => bail!("the generator thread panicked"),
    };
    let caught_up = Instant::now() + Duration::from_secs(60);
    let target_admin = kafka::admin("target", &spec.target, spec.backend)?;
    let (src_end, dst_end) = loop {
        let (s, t) = strait_dataplane::io::block_on(spec.backend, async {
            (
                ends(&source_admin, &topic, spec.partitions).await,
                ends(&target_admin, &remote, spec.partitions).await,
            )
        })?;
        if let (Some(s), Some(t)) = (s, t)
            && (s.iter().zip(&t).all(|(a, b)| b >= a) || Instant::now() > caught_up)
        {
            break (s, t);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    stop_sampling.store(true, Ordering::Relaxed);
    let samples = sampler
        .join()
        .map_err(|_| anyhow::anyhow!("the sampler panicked"))?;
    for m in &members {
        m.signal("TERM");
    }
    for m in members {
        m.wait(Duration::from_secs(30))?;
    }
    let (missing, extra) = src_end.iter().zip(&dst_end).fold((0, 0), |(m, e), (s, t)| {
        (m + (s - t).max(0) as u64, e + (t - s).max(0) as u64)
    });
    let results = events
        .into_iter()
        .map(|(event, before, after, at, took)| {
            let per = stalls(&samples, at, at + took + settle);
            let secs: Vec<f64> = per.iter().map(Duration::as_secs_f64).collect();
            EventResult {
                event,
                members_before: before,
                members_after: after,
                rebalance_s: took.as_secs_f64(),
                max_stall_s: secs.iter().copied().fold(0.0, f64::max),
                partitions_stalled_over_1s: secs.iter().filter(|s| **s > 1.0).count() as u32,
                stall_s: secs,
            }
        })
        .collect();
    Ok(GroupResult {
        spec: spec.clone(),
        events: results,
        produced,
        missing,
        extra,
    })
}

/// The result as Markdown table rows.
pub fn table(r: &GroupResult) -> String {
    let mut out = String::from(
        "| event | members | rebalance s | max stall s | partitions stalled > 1 s |\n|---|---|---|---|---|\n",
    );
    for e in &r.events {
        out.push_str(&format!(
            "| {} | {} → {} | {:.2} | {:.2} | {} of {} |\n",
            e.event,
            e.members_before,
            e.members_after,
            e.rebalance_s,
            e.max_stall_s,
            e.partitions_stalled_over_1s,
            e.stall_s.len()
        ));
    }
    out.push_str(&format!(
        "\n{} records produced, {} missing on the target, {} extra (duplicates)\n",
        r.produced, r.missing, r.extra
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_with_nothing_to_copy_is_not_stalled_and_one_that_waits_is() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let sample = |ms, source: [i64; 2], target: [i64; 2]| Sample {
            at: at(ms),
            source: source.to_vec(),
            target: target.to_vec(),
        };
        let samples = vec![
            sample(0, [10, 10], [10, 5]),
            sample(100, [10, 20], [10, 5]),
            sample(900, [10, 30], [10, 5]),
            sample(1000, [10, 30], [10, 30]),
        ];
        let s = stalls(&samples, at(0), at(1000));
        assert_eq!(s[0], Duration::ZERO);
        assert_eq!(s[1], Duration::from_millis(900));
        assert!(stalls(&samples, at(2000), at(3000)).is_empty());
    }
}
