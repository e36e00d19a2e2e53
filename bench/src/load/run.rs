//! One load run in order: the flow's clients, the test topic, the wait for its remote copy, the
//! producer and reader tasks with live progress, the result, and the clean-up.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::IsTerminal;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use kafka_protocol::ResponseError;
use strait_control::cluster::{Cluster, IsolationLevel, NewTopic, OffsetSpec, TopicPartition};
use strait_control::commands::translate::select_flow;
use strait_control::config::FlowConfig;
use strait_control::duties::offsets::cluster_for;
use strait_dataplane::batch::Compression;

use super::consume::consume_partition;
use super::output::{self, LoadResult, Setup, Throughput};
use super::produce::{ProducePlan, produce_partition};
use super::series::Series;
use super::state::Run;
use super::{LoadArgs, load_config};
use crate::kafka::{self, now_us};
use crate::payload::RecordShape;

/// The flow's three clients the load test uses.
struct Clients {
    source: Rc<Cluster>,
    target: Rc<Cluster>,
    target_admin: Rc<Cluster>,
}

/// Runs the load test; `Ok(false)` when records were lost (or duplicated, unless allowed).
pub fn run(args: &LoadArgs) -> Result<bool> {
    let codec = args.validate()?;
    let cfg = load_config(&args.config, &args.set)?;
    let flow = select_flow(&cfg, args.flow.as_deref())?.clone();
    let run_id = random_u64();
    let topic = args.topic.clone().unwrap_or_else(|| {
        format!(
            "strait-load.{}-{:04x}",
            now_us() / 1_000_000,
            run_id & 0xffff
        )
    });
    if !flow.should_replicate_topic(&topic) {
        bail!(
            "flow {} does not replicate topic {topic} (its topics / topics.exclude filters or the replication policy leave it out): give a --topic it copies",
            flow.name()
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, run_flow(args, &flow, &topic, run_id, codec))
}

/// A random run id: std's hasher keys are drawn from the OS per process.
fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(now_us());
    h.finish()
}

async fn run_flow(
    args: &LoadArgs,
    flow: &FlowConfig,
    topic: &str,
    run_id: u64,
    codec: Compression,
) -> Result<bool> {
    let name = flow.name();
    let c = &flow.clients;
    let clients = Clients {
        source: cluster_for(&name, "source admin", &c.source_admin.client)?,
        target: cluster_for(&name, "target consumer", &c.target_consumer.client)?,
        target_admin: cluster_for(&name, "target admin", &c.target_admin.client)?,
    };
    let remote = flow.remote_topic(topic);
    let partitions = prepare_topic(&clients.source, topic, args).await?;
    let created = !args.use_existing_topic;
    let outcome = measure(
        args, flow, &clients, topic, &remote, partitions, run_id, codec,
    )
    .await;
    if created && !args.keep {
        clean_up(&clients, topic, &remote).await;
    } else if created {
        eprintln!(
            "strait-bench load: kept {topic} on the source and {remote} on the target (--keep)"
        );
    }
    let result = outcome?;
    print!("{}", output::summary(&result));
    if let Some(json) = &args.json {
        for p in output::write_files(json, &result)? {
            eprintln!("strait-bench load: wrote {}", p.display());
        }
    }
    Ok(result.ok())
}

/// Creates the test topic (refusing one that exists) or checks the existing one; returns its
/// partition count.
async fn prepare_topic(source: &Cluster, topic: &str, args: &LoadArgs) -> Result<usize> {
    if args.use_existing_topic {
        let md = source
            .refresh_metadata(Some(&[topic]))
            .await
            .with_context(|| format!("reading the metadata of {topic} on the source"))?;
        let t = md
            .topics
            .get(topic)
            .ok_or_else(|| anyhow!("--use-existing-topic: {topic} does not exist on the source"))?;
        return Ok(t.partitions.len());
    }
    let new = NewTopic::new(topic, args.partitions).replication_factor(args.replication_factor);
    match source.create_topic(new, 60_000).await {
        Ok(()) => {}
        Err(e) if e.is(ResponseError::TopicAlreadyExists) => bail!(
            "{topic} already exists on the source: strait-bench load writes only to topics it creates (pass --use-existing-topic to write to it anyway, or another --topic)"
        ),
        Err(e) => return Err(e).with_context(|| format!("creating {topic} on the source")),
    }
    eprintln!(
        "strait-bench load: created {topic} ({} partitions) on the source",
        args.partitions
    );
    Ok(args.partitions as usize)
}

/// Deletes the test topic, then its remote copy (after the source's, so that the replicator
/// has nothing left to recreate it from). Failures are reported, not fatal.
async fn clean_up(clients: &Clients, topic: &str, remote: &str) {
    for (cluster, name) in [(&clients.source, topic), (&clients.target_admin, remote)] {
        match kafka::delete_topics(cluster, &[name.to_string()]).await {
            Ok(d) if d.is_empty() => {}
            Ok(_) => eprintln!("strait-bench load: deleted {name} on {}", cluster.alias()),
            Err(e) => eprintln!(
                "strait-bench load: could not delete {name} on {}: {e:#}",
                cluster.alias()
            ),
        }
    }
}

/// Waits until the replicator created `remote` with at least `partitions` led partitions.
async fn await_remote(
    target: &Cluster,
    remote: &str,
    partitions: usize,
    wait: Duration,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut said = false;
    loop {
        let last = match kafka::leaders(target, remote, partitions as i32).await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => String::new(),
            Err(e) => format!(" (last error: {e:#})"),
        };
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the remote topic {remote} did not appear on the target with {partitions} partitions within {} s{last}: is the replicator running, does its topic filter take the test topic, and how often does it look for new topics (MM2: refresh.topics.interval.seconds, 600 by default)? --remote-wait-s waits longer",
                wait.as_secs()
            );
        }
        if !said {
            eprintln!(
                "strait-bench load: waiting for the replicator to create {remote} on the target"
            );
            said = true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Where each remote partition ends now (read_committed): this run's copies come after.
async fn remote_ends(target: &Cluster, remote: &str, partitions: usize) -> Result<Vec<i64>> {
    let tps: Vec<TopicPartition> = (0..partitions as i32)
        .map(|p| TopicPartition::new(remote, p))
        .collect();
    let mut ends = target
        .list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
        .await;
    tps.iter()
        .map(|tp| {
            ends.remove(tp)
                .unwrap_or(Ok(0))
                .with_context(|| format!("reading the end of {tp} on the target"))
        })
        .collect()
}

#[allow(clippy::too_many_arguments)] // one run's facts, passed down once
async fn measure(
    args: &LoadArgs,
    flow: &FlowConfig,
    clients: &Clients,
    topic: &str,
    remote: &str,
    partitions: usize,
    run_id: u64,
    codec: Compression,
) -> Result<LoadResult> {
    // After the creation, inside the clean-up's reach.
    clients
        .source
        .wait_for_leaders(topic, 60_000)
        .await
        .with_context(|| format!("waiting for the leaders of {topic} on the source"))?;
    await_remote(
        &clients.target,
        remote,
        partitions,
        Duration::from_secs(args.remote_wait_s),
    )
    .await?;
    let ends = remote_ends(&clients.target, remote, partitions).await?;
    let (producer_id, producer_epoch) = clients
        .source
        .init_producer_id()
        .await
        .context("getting an idempotent producer id from the source")?;
    let start_us = now_us();
    let interval_us = (args.interval_s * 1e6) as u64;
    let run = Rc::new(RefCell::new(Run::new(
        run_id,
        start_us,
        partitions,
        interval_us,
    )));
    let plan = Rc::new(ProducePlan {
        topic: topic.to_string(),
        partitions: (0..partitions as i32).collect(),
        rate_per_s: (args.rate > 0.0).then_some(args.rate),
        records: args.records,
        end_us: args
            .records
            .is_none()
            .then(|| start_us + args.duration_s * 1_000_000),
        record_size: args.record_size,
        shape: RecordShape::new(
            args.record_size,
            args.key_size,
            if args.key_size > 0 {
                args.keys.max(1)
            } else {
                0
            },
            args.headers,
        ),
        codec,
        batch_bytes: args.batch_bytes,
        producer_id,
        producer_epoch,
    });
    let produced = drive(args, flow, clients, &plan, &run, remote, &ends).await;
    let mut result = result_of(args, flow, topic, remote, &run.borrow());
    let series = std::mem::replace(&mut run.borrow_mut().series, Series::new(0, 1));
    result.intervals = series.finish();
    produced.map(|()| result)
}

/// Runs the readers, the producers, Ctrl-C handling and progress; returns once the readers
/// are done (the first producer error, if any, after the drain).
#[allow(clippy::too_many_arguments)] // one run's facts, passed down once
async fn drive(
    args: &LoadArgs,
    flow: &FlowConfig,
    clients: &Clients,
    plan: &Rc<ProducePlan>,
    run: &Rc<RefCell<Run>>,
    remote: &str,
    ends: &[i64],
) -> Result<()> {
    let drain_us = args.drain_timeout_s * 1_000_000;
    let mut readers = Vec::new();
    for (p, from) in ends.iter().enumerate() {
        // A client (a connection) of its own per partition: see `consume`.
        let c = cluster_for(
            &flow.name(),
            "target consumer",
            &flow.clients.target_consumer.client,
        )?;
        let tp = TopicPartition::new(remote, p as i32);
        readers.push(tokio::task::spawn_local(consume_partition(
            c,
            tp,
            *from,
            run.clone(),
            drain_us,
        )));
    }
    let producers: Vec<_> = (0..plan.partitions.len())
        .map(|i| {
            tokio::task::spawn_local(produce_partition(
                clients.source.clone(),
                plan.clone(),
                i,
                run.clone(),
            ))
        })
        .collect();
    let interrupt = tokio::task::spawn_local(stop_on_ctrl_c(run.clone()));
    let progress = tokio::task::spawn_local(progress(run.clone(), args.interval_s));
    let mut first_error = None;
    for p in producers {
        let r = p.await.map_err(|e| anyhow!("a producer task failed: {e}"));
        if let Err(e) = r.and_then(|r| r) {
            let mut r = run.borrow_mut();
            r.stop = true;
            r.stop_reason.get_or_insert_with(|| format!("{e:#}"));
            first_error.get_or_insert(e);
        }
    }
    run.borrow_mut().production_ended_us = Some(now_us());
    for r in readers {
        r.await.map_err(|e| anyhow!("a reader task failed: {e}"))?;
    }
    run.borrow_mut().finished = true;
    interrupt.abort();
    let _ = progress.await;
    first_error.map_or(Ok(()), Err)
}

/// The first Ctrl-C stops production (the run then drains and reports as usual).
async fn stop_on_ctrl_c(run: Rc<RefCell<Run>>) {
    if tokio::signal::ctrl_c().await.is_ok() {
        eprintln!("strait-bench load: interrupted: production stops; draining, then cleaning up");
        let mut r = run.borrow_mut();
        r.stop = true;
        r.stop_reason = Some("interrupted (Ctrl-C)".into());
    }
}

/// A progress line every interval (at least every second): a spinner on a terminal, plain
/// lines on stderr otherwise.
async fn progress(run: Rc<RefCell<Run>>, interval_s: f64) {
    let tty = std::io::stderr().is_terminal();
    let bar = tty.then(|| {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        pb
    });
    let every = Duration::from_secs_f64(interval_s.max(1.0));
    loop {
        tokio::time::sleep(if tty {
            Duration::from_millis(200)
        } else {
            every
        })
        .await;
        let (line, done) = {
            let r = run.borrow();
            (r.progress_line(now_us()), r.finished)
        };
        match &bar {
            Some(pb) => pb.set_message(line),
            None if !done => eprintln!("strait-bench load: {line}"),
            None => {}
        }
        if done {
            break;
        }
    }
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
}

fn result_of(args: &LoadArgs, flow: &FlowConfig, topic: &str, remote: &str, r: &Run) -> LoadResult {
    let counts = r.tracker.totals();
    let end_us = r.production_ended_us.unwrap_or_else(now_us);
    let secs = |to: u64| to.saturating_sub(r.start_us) as f64 / 1e6;
    let last = r.last_arrival_us.unwrap_or(r.start_us);
    let drain_s = if counts.lost == 0 {
        last.saturating_sub(end_us) as f64 / 1e6
    } else {
        args.drain_timeout_s as f64
    };
    LoadResult {
        run_id: format!("{:016x}", r.run_id),
        started_ms: r.start_us / 1000,
        setup: Setup {
            flow: flow.name(),
            topic: topic.to_string(),
            remote_topic: remote.to_string(),
            created_topic: !args.use_existing_topic,
            kept: args.keep || args.use_existing_topic,
            partitions: r.tracker.per_partition().len(),
            rate: args.rate,
            record_size_bytes: args.record_size,
            key_size_bytes: args.key_size,
            headers: args.headers,
            compression: args.compression.clone(),
            batch_bytes: args.batch_bytes,
            drain_timeout_s: args.drain_timeout_s,
            interval_s: args.interval_s,
        },
        produced: Throughput::new(r.produced_records, r.produced_bytes, secs(end_us)),
        received: Throughput::new(counts.received, r.received_bytes, secs(last)),
        per_partition: r.tracker.per_partition(),
        unexpected: r.tracker.unexpected(),
        foreign: r.foreign,
        latency: r.series.overall(),
        max_behind_records: r.max_behind_records,
        drain_s,
        fetch_errors: r.fetch_errors,
        last_fetch_error: r.last_fetch_error.clone(),
        stop_reason: r.stop_reason.clone(),
        intervals: Vec::new(),
        problems: output::problems(&counts, args.allow_duplicates, args.drain_timeout_s),
        counts,
    }
}
