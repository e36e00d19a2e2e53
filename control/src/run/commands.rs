//! Operator commands from the REST API, carried out by the control loop: pause, resume and
//! stop at flow, topic or partition scope, and reading or changing a flow's stored offsets.
//! Every command is answered on its oneshot reply.

use std::collections::BTreeMap;

use strait_dataplane::shard::{FlowId, PartitionKey, ShardCommand};

use super::FlowRuntime;
use super::assign::Partitions;
use super::outbox::Shards;
use crate::api::command::{
    Action, ConnectOffset, ConnectPartition, ConnectPosition, OffsetApplied, OffsetChange, Scope,
};
use crate::api::{CommandError, Reply, Request};
use crate::cluster::{IsolationLevel, OffsetSpec};
use crate::model::TopicPartition;
use crate::store::progress;

/// What an operator asked of a partition, until resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hold {
    Paused,
    Stopped,
}

/// The operator's holds on partitions.
pub(super) type Holds = BTreeMap<PartitionKey, Hold>;

/// What a command may change.
pub(super) struct Ctx<'a> {
    pub(super) flows: &'a mut [FlowRuntime],
    pub(super) parts: &'a mut Partitions,
    pub(super) shards: &'a Shards,
    pub(super) holds: &'a mut Holds,
    /// Who asked, for the log.
    pub(super) client: &'a str,
}

/// Carries out one request.
pub(super) async fn handle(request: Request, ctx: &mut Ctx<'_>) -> Result<Reply, CommandError> {
    match request {
        Request::Act { scope, action } => act(&scope, action, ctx).await,
        Request::GetOffsets { flow } => {
            let fid = flow_id(ctx.flows, &flow)?;
            let f = &ctx.flows[fid as usize];
            Ok(Reply::Offsets(
                f.progress
                    .entries()
                    .iter()
                    .map(|(tp, e)| ConnectOffset {
                        partition: ConnectPartition {
                            cluster: f.plan.source.clone(),
                            topic: tp.topic.to_string(),
                            partition: tp.partition,
                        },
                        offset: Some(ConnectPosition {
                            offset: e.next_offset,
                        }),
                    })
                    .collect(),
            ))
        }
        Request::SetOffsets { flow, changes } => set_offsets(&flow, changes, ctx).await,
        // The API link hands reloads to the control loop (`reload`), which has what they need.
        Request::Reload => Err(CommandError::Unavailable {
            message: "a reload is carried out by the control loop; try again".into(),
        }),
    }
}

fn flow_name(f: &FlowRuntime) -> String {
    format!("{}->{}", f.plan.source, f.plan.target)
}

fn flow_id(flows: &[FlowRuntime], name: &str) -> Result<FlowId, CommandError> {
    flows
        .iter()
        .position(|f| !f.retired && flow_name(f) == name)
        .map(|i| i as FlowId)
        .ok_or_else(|| CommandError::UnknownFlow { flow: name.into() })
}

/// The partitions of `scope`: 404 when its flow, topic or partition is unknown.
fn keys_in(
    scope: &Scope,
    flows: &[FlowRuntime],
    parts: &Partitions,
) -> Result<(FlowId, Vec<PartitionKey>), CommandError> {
    let fid = flow_id(flows, &scope.flow)?;
    let keys: Vec<PartitionKey> = parts
        .keys()
        .filter(|k| k.flow == fid)
        .filter(|k| scope.topic.as_deref().is_none_or(|t| &*k.topic == t))
        .filter(|k| scope.partition.is_none_or(|p| k.partition == p))
        .cloned()
        .collect();
    if keys.is_empty()
        && let Some(topic) = &scope.topic
    {
        let topic_known = parts.keys().any(|k| k.flow == fid && &*k.topic == topic);
        return Err(match (topic_known, scope.partition) {
            (true, Some(partition)) => CommandError::UnknownPartition {
                flow: scope.flow.clone(),
                topic: topic.clone(),
                partition,
            },
            _ => CommandError::UnknownTopic {
                flow: scope.flow.clone(),
                topic: topic.clone(),
            },
        });
    }
    Ok((fid, keys))
}

/// An operator's commands go to the shards of `keys` only when no commands wait for them:
/// each request then queues at most its own (a few per partition), and the outbox's bound
/// holds whatever operators send. A busy shard answers 503 for a moment.
fn shards_idle<'k>(
    shards: &Shards,
    parts: &Partitions,
    keys: impl IntoIterator<Item = &'k PartitionKey>,
) -> Result<(), CommandError> {
    let busy = keys
        .into_iter()
        .filter_map(|k| parts.get(k).map(|st| st.shard))
        .find(|&s| shards.waiting(s) > 0);
    match busy {
        Some(shard) => Err(CommandError::Unavailable {
            message: format!(
                "shard {shard} has {} commands waiting for it; try again",
                shards.waiting(shard)
            ),
        }),
        None => Ok(()),
    }
}

fn send(shards: &Shards, shard: usize, cmd: ShardCommand) -> Result<(), CommandError> {
    shards
        .send(shard, cmd)
        .map_err(|e| CommandError::Unavailable {
            message: format!("{e}; try again"),
        })
}

/// Pause, resume or stop the partitions of a scope.
async fn act(scope: &Scope, action: Action, ctx: &mut Ctx<'_>) -> Result<Reply, CommandError> {
    let (fid, keys) = keys_in(scope, ctx.flows, ctx.parts)?;
    shards_idle(ctx.shards, ctx.parts, &keys)?;
    let mut done = Vec::new();
    for key in keys {
        let Some(st) = ctx.parts.get(&key) else {
            continue;
        };
        if !st.assigned {
            // Failed before it reached a shard: nothing fetches or produces it.
            if scope.partition.is_some() {
                return Err(CommandError::WrongState {
                    message: format!(
                        "partition {}-{} is not replicated by any shard: {}",
                        key.topic,
                        key.partition,
                        st.failed.as_deref().unwrap_or("not assigned")
                    ),
                });
            }
            continue;
        }
        let (shard, vanished) = (st.shard, st.vanished);
        match action {
            Action::Pause | Action::Stop => {
                send(ctx.shards, shard, ShardCommand::Pause(key.clone()))?;
                let hold = if action == Action::Stop {
                    Hold::Stopped
                } else {
                    Hold::Paused
                };
                ctx.holds.insert(key.clone(), hold);
                if let Some(st) = ctx.parts.get_mut(&key) {
                    st.paused = true;
                }
            }
            Action::Resume => {
                // A partition whose source topic is gone stays held by its shard until the
                // topic is back.
                if !vanished {
                    send(ctx.shards, shard, ShardCommand::Resume(key.clone()))?;
                }
                ctx.holds.remove(&key);
                if let Some(st) = ctx.parts.get_mut(&key) {
                    st.paused = false;
                }
            }
        }
        done.push((key.topic.to_string(), key.partition));
    }
    let f = &mut ctx.flows[fid as usize];
    tracing::info!(
        client = ctx.client,
        flow = %flow_name(f),
        topic = scope.topic.as_deref().unwrap_or("*"),
        partition = scope.partition.map_or("*".to_string(), |p| p.to_string()),
        action = action.name(),
        partitions = done.len(),
        "operator request applied"
    );
    if action == Action::Stop {
        // What the shards acknowledge after this still arrives in their reports and is
        // written by the next periodic flush.
        if let Err(e) = f.flush_progress().await {
            tracing::warn!(error = %e, "cannot write progress after a stop; will retry");
        }
    }
    Ok(Reply::Acted { partitions: done })
}

/// Sets (or resets) the next source offset of stopped partitions: every change is checked
/// before any is applied.
async fn set_offsets(
    flow: &str,
    changes: Vec<OffsetChange>,
    ctx: &mut Ctx<'_>,
) -> Result<Reply, CommandError> {
    let fid = flow_id(ctx.flows, flow)?;
    let checked = check_changes(flow, fid, changes, ctx)?;
    let targets = resolve(&ctx.flows[fid as usize], &checked).await?;
    shards_idle(ctx.shards, ctx.parts, targets.iter().map(|(k, _)| k))?;
    let mut applied = Vec::new();
    for (key, after) in targets {
        if let Some(a) = apply_one(flow, fid, &key, after, ctx)? {
            applied.push(a);
        }
    }
    let f = &mut ctx.flows[fid as usize];
    f.flush_progress()
        .await
        .map_err(|e| CommandError::Unavailable {
            message: format!(
                "the offsets are set but could not be written to {} yet ({e}); strait retries at the next flush",
                f.progress.topic()
            ),
        })?;
    Ok(Reply::OffsetsSet(applied))
}

/// The partitions of the changes (every partition of the flow, reset, when none is named),
/// each of which must be STOPPED and held by a shard.
fn check_changes(
    flow: &str,
    fid: FlowId,
    changes: Vec<OffsetChange>,
    ctx: &Ctx<'_>,
) -> Result<Vec<(PartitionKey, Option<i64>)>, CommandError> {
    let changes = if changes.is_empty() {
        ctx.parts
            .keys()
            .filter(|k| k.flow == fid)
            .map(|k| OffsetChange {
                topic: k.topic.to_string(),
                partition: k.partition,
                offset: None,
            })
            .collect()
    } else {
        changes
    };
    let mut checked = Vec::new();
    for c in changes {
        let scope = Scope {
            flow: flow.into(),
            topic: Some(c.topic.clone()),
            partition: Some(c.partition),
        };
        let (_, keys) = keys_in(&scope, ctx.flows, ctx.parts)?;
        let Some(key) = keys.into_iter().next() else {
            continue;
        };
        let st = &ctx.parts[&key];
        if ctx.holds.get(&key) != Some(&Hold::Stopped) {
            return Err(CommandError::WrongState {
                message: format!(
                    "partition {}-{} of flow {flow} is not STOPPED: stop it first (PUT /flows/{{flow}}/stop, or at topic or partition scope); offsets change only while stopped",
                    c.topic, c.partition
                ),
            });
        }
        if !st.assigned {
            return Err(CommandError::WrongState {
                message: format!(
                    "partition {}-{} is not replicated by any shard: {}",
                    c.topic,
                    c.partition,
                    st.failed.as_deref().unwrap_or("not assigned")
                ),
            });
        }
        checked.push((key, c.offset));
    }
    Ok(checked)
}

/// The new offset of each partition: a reset one from the source's earliest or latest offset
/// (`auto.offset.reset`); a given one must not be past the source's end.
async fn resolve(
    f: &FlowRuntime,
    checked: &[(PartitionKey, Option<i64>)],
) -> Result<Vec<(PartitionKey, i64)>, CommandError> {
    let tps = |reset: bool| -> Vec<TopicPartition> {
        checked
            .iter()
            .filter(|(_, o)| o.is_none() == reset)
            .map(|(k, _)| TopicPartition::new(&*k.topic, k.partition))
            .collect()
    };
    let reset_to = source_offsets(f, &tps(true), f.plan.start_at_earliest).await?;
    // An offset past the source's end would lose the partition's position.
    let ends = source_offsets(f, &tps(false), false).await?;
    let mut out = Vec::new();
    for (key, offset) in checked {
        let tp = TopicPartition::new(&*key.topic, key.partition);
        if let (Some(o), Some(end)) = (offset, ends.get(&tp))
            && o > end
        {
            return Err(CommandError::BadRequest {
                message: format!(
                    "offset {o} of {}-{} is past the source's end {end}",
                    key.topic, key.partition
                ),
            });
        }
        if let Some(after) = offset.or_else(|| reset_to.get(&tp).copied()) {
            out.push((key.clone(), after));
        }
    }
    Ok(out)
}

/// Moves one stopped partition to `after`: the shard seeks (and stays paused), the partition
/// table and the progress store take the new position, the log says who and what.
fn apply_one(
    flow: &str,
    fid: FlowId,
    key: &PartitionKey,
    after: i64,
    ctx: &mut Ctx<'_>,
) -> Result<Option<OffsetApplied>, CommandError> {
    let Some(st) = ctx.parts.get_mut(key) else {
        return Ok(None);
    };
    let before = st.next_offset;
    // Seek clears a failure and makes the partition run: pause it again at once.
    send_both(ctx.shards, st, key, after)?;
    st.next_offset = after;
    st.failed = None;
    let tp = TopicPartition::new(&*key.topic, key.partition);
    ctx.flows[fid as usize].offsets.on_seek(&tp, after);
    ctx.flows[fid as usize].progress.update(
        &tp,
        progress::Entry {
            next_offset: after,
            topic_id: st.topic_id,
            target_offset: -1,
            leader_epoch: -1,
        },
    );
    tracing::info!(
        client = ctx.client,
        flow,
        topic = %key.topic,
        partition = key.partition,
        before,
        after,
        "offset changed through the REST API"
    );
    Ok(Some(OffsetApplied {
        topic: key.topic.to_string(),
        partition: key.partition,
        before,
        after,
    }))
}

/// Seek, then pause: the partition stays stopped at its new position. Both reach the shard
/// in this order (the outbox keeps it); the seek's generation counts once it is sent.
fn send_both(
    shards: &Shards,
    st: &mut super::assign::PartitionState,
    key: &PartitionKey,
    offset: i64,
) -> Result<(), CommandError> {
    let shard = st.shard;
    let generation = st.seek_generation + 1;
    send(
        shards,
        shard,
        ShardCommand::Seek {
            key: key.clone(),
            offset,
            generation,
        },
    )?;
    st.seek_generation = generation;
    send(shards, shard, ShardCommand::Pause(key.clone()))
}

/// The earliest (or latest) source offsets of these partitions now: where
/// `auto.offset.reset` puts them, or how far an offset may go.
async fn source_offsets(
    f: &FlowRuntime,
    partitions: &[TopicPartition],
    earliest: bool,
) -> Result<BTreeMap<TopicPartition, i64>, CommandError> {
    if partitions.is_empty() {
        return Ok(BTreeMap::new());
    }
    let spec = if earliest {
        OffsetSpec::Earliest
    } else {
        OffsetSpec::Latest
    };
    let isolation: IsolationLevel = f.plan.fetch.isolation_level.into();
    let mut out = BTreeMap::new();
    for (tp, r) in f.source.list_offsets(partitions, spec, isolation).await {
        let o = r.map_err(|e| CommandError::Unavailable {
            message: format!("cannot read the source offsets of {tp}: {e}"),
        })?;
        out.insert(tp, o);
    }
    Ok(out)
}
