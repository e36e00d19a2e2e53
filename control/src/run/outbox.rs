//! Commands for the shards, sent without ever blocking the control loop.
//!
//! Each shard reads its bounded command channel once per shard tick. A blocking send into a
//! full channel would freeze the control thread, and with it the REST API, `/health` and the
//! group's heartbeats (a member that stops heartbeating is fenced). So control only ever
//! `try_send`s; what a shard's channel does not take waits in that shard's queue here, which
//! the control loop flushes every turn. A shard with commands waiting takes new ones behind
//! them, so each shard sees its commands in the order control issued them.
//!
//! [`Outbox`] is pure (the delivery is a closure; time is passed in) and bounded: a shard may
//! have at most [`COMMANDS_PER_PARTITION`] commands per partition of the run waiting, plus
//! [`COMMANDS_SLACK`]; past that the shard has not taken commands for so long that the run
//! stops with [`RunError::ShardStuck`] rather than grow without end. [`Shards`] joins it to
//! the shard threads' handles for the control loop.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crossbeam_channel::TrySendError;
use strait_dataplane::shard::{ShardCommand, ShardHandle};

use super::RunError;

/// Commands that may wait per partition of the run: its assignment, revocation, a seek and a
/// pause (an operator's offset change), with room for a pause or resume or a size change.
pub(super) const COMMANDS_PER_PARTITION: usize = 6;
/// Besides the per-partition share: the shutdown, the one lease (a newer lease replaces a
/// waiting one) and operator commands.
pub(super) const COMMANDS_SLACK: usize = 1024;

/// The capacity of each shard's command channel (what it reads per tick at most).
pub(super) const SHARD_CHANNEL_CAPACITY: usize = 1024;

/// Hands one command to a shard's channel without waiting.
pub(super) type Deliver<'a> =
    dyn FnMut(usize, ShardCommand) -> Result<(), TrySendError<ShardCommand>> + 'a;

/// One shard's waiting commands.
#[derive(Debug, Default)]
struct Queue {
    waiting: VecDeque<ShardCommand>,
    /// While commands wait: when the shard last took one (or when the first had to wait).
    since: Option<Instant>,
    /// The stall was logged (once per stall).
    reported: bool,
}

/// A shard that has not taken commands for a while.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Backlog {
    pub(super) shard: usize,
    pub(super) waiting: usize,
    /// Since when it took none.
    pub(super) since: Instant,
}

/// What changed about a shard's stall, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Notice {
    /// Took no commands for `stalled` (past the stall timeout), `waiting` wait for it.
    Stuck {
        shard: usize,
        waiting: usize,
        stalled: Duration,
    },
    /// Takes commands again after a reported stall.
    Moving { shard: usize },
}

/// Every shard's waiting commands.
#[derive(Debug)]
pub(super) struct Outbox {
    queues: Vec<Queue>,
    /// Partitions of the run: the bound follows them.
    partitions: usize,
}

impl Outbox {
    pub(super) fn new(shards: usize) -> Outbox {
        Outbox {
            queues: (0..shards).map(|_| Queue::default()).collect(),
            partitions: 0,
        }
    }

    /// The partitions of the run now (the bound is per partition).
    pub(super) fn set_partitions(&mut self, partitions: usize) {
        self.partitions = partitions;
    }

    /// Commands that may wait for one shard.
    pub(super) fn limit(&self) -> usize {
        COMMANDS_PER_PARTITION
            .saturating_mul(self.partitions)
            .saturating_add(COMMANDS_SLACK)
    }

    /// Commands waiting for `shard`.
    pub(super) fn waiting(&self, shard: usize) -> usize {
        self.queues.get(shard).map_or(0, |q| q.waiting.len())
    }

    /// Hands `cmd` to `shard` now when nothing waits for it and its channel has room, else
    /// queues it behind what waits. A lease replaces a waiting lease: it is the shard's one
    /// produce deadline, independent of the partition commands around it.
    pub(super) fn push(
        &mut self,
        shard: usize,
        cmd: ShardCommand,
        now: Instant,
        deliver: &mut Deliver<'_>,
    ) -> Result<(), RunError> {
        let limit = self.limit();
        let q = self
            .queues
            .get_mut(shard)
            .ok_or(RunError::ShardGone { shard })?;
        if q.waiting.is_empty() {
            return match deliver(shard, cmd) {
                Ok(()) => Ok(()),
                Err(TrySendError::Full(cmd)) => {
                    q.waiting.push_back(cmd);
                    q.since = Some(now);
                    Ok(())
                }
                Err(TrySendError::Disconnected(_)) => Err(RunError::ShardGone { shard }),
            };
        }
        if matches!(cmd, ShardCommand::Lease { .. }) {
            q.waiting
                .retain(|c| !matches!(c, ShardCommand::Lease { .. }));
        }
        if q.waiting.len() >= limit {
            return Err(RunError::ShardStuck {
                shard,
                waiting: q.waiting.len(),
                stalled_s: q
                    .since
                    .map_or(0, |s| now.saturating_duration_since(s).as_secs()),
            });
        }
        q.waiting.push_back(cmd);
        Ok(())
    }

    /// Hands every shard what waits for it, in order, until its channel is full.
    pub(super) fn flush(
        &mut self,
        now: Instant,
        deliver: &mut Deliver<'_>,
    ) -> Result<(), RunError> {
        for (shard, q) in self.queues.iter_mut().enumerate() {
            let mut took = false;
            while let Some(cmd) = q.waiting.pop_front() {
                match deliver(shard, cmd) {
                    Ok(()) => took = true,
                    Err(TrySendError::Full(cmd)) => {
                        q.waiting.push_front(cmd);
                        break;
                    }
                    Err(TrySendError::Disconnected(cmd)) => {
                        q.waiting.push_front(cmd);
                        return Err(RunError::ShardGone { shard });
                    }
                }
            }
            if q.waiting.is_empty() {
                q.since = None;
            } else if took {
                // It takes commands, only not all at once: not stalled.
                q.since = Some(now);
            }
        }
        Ok(())
    }

    /// Drops what waits for `shard` (its thread has ended).
    pub(super) fn forget(&mut self, shard: usize) {
        if let Some(q) = self.queues.get_mut(shard) {
            *q = Queue::default();
        }
    }

    /// Shards that took no command for at least `after` while commands waited.
    pub(super) fn backlogs(&self, now: Instant, after: Duration) -> Vec<Backlog> {
        self.queues
            .iter()
            .enumerate()
            .filter_map(|(shard, q)| {
                let since = q.since?;
                (now.saturating_duration_since(since) >= after).then_some(Backlog {
                    shard,
                    waiting: q.waiting.len(),
                    since,
                })
            })
            .collect()
    }

    /// Stalls that began or ended since the last call: a shard that took no command for
    /// `after` while commands waited (once per stall), and such a shard taking all again.
    pub(super) fn notices(&mut self, now: Instant, after: Duration) -> Vec<Notice> {
        let mut out = Vec::new();
        for (shard, q) in self.queues.iter_mut().enumerate() {
            match (q.since, q.reported) {
                (Some(since), false) if now.saturating_duration_since(since) >= after => {
                    q.reported = true;
                    out.push(Notice::Stuck {
                        shard,
                        waiting: q.waiting.len(),
                        stalled: now.saturating_duration_since(since),
                    });
                }
                (since, true) if since.is_none_or(|s| now.saturating_duration_since(s) < after) => {
                    q.reported = false;
                    out.push(Notice::Moving { shard });
                }
                _ => {}
            }
        }
        out
    }
}

/// The shard threads and the commands waiting for them: every command to a shard goes
/// through here. The control thread is single-threaded; the outbox is borrowed only inside
/// these methods, never across an await.
pub(super) struct Shards {
    handles: Vec<ShardHandle>,
    outbox: RefCell<Outbox>,
}

impl Shards {
    pub(super) fn new(handles: Vec<ShardHandle>) -> Shards {
        let outbox = RefCell::new(Outbox::new(handles.len()));
        Shards { handles, outbox }
    }

    pub(super) fn len(&self) -> usize {
        self.handles.len()
    }

    pub(super) fn handles(&self) -> &[ShardHandle] {
        &self.handles
    }

    pub(super) fn into_handles(self) -> Vec<ShardHandle> {
        self.handles
    }

    fn deliver(
        handles: &[ShardHandle],
    ) -> impl FnMut(usize, ShardCommand) -> Result<(), TrySendError<ShardCommand>> + '_ {
        |shard, cmd| match handles.get(shard) {
            Some(h) => h.commands.try_send(cmd),
            None => Err(TrySendError::Disconnected(cmd)),
        }
    }

    /// Sends `cmd` to `shard` in order, now or at a later turn ([`Outbox::push`]).
    pub(super) fn send(&self, shard: usize, cmd: ShardCommand) -> Result<(), RunError> {
        self.outbox.borrow_mut().push(
            shard,
            cmd,
            Instant::now(),
            &mut Self::deliver(&self.handles),
        )
    }

    /// Commands waiting for `shard`.
    pub(super) fn waiting(&self, shard: usize) -> usize {
        self.outbox.borrow().waiting(shard)
    }

    /// Hands the shards what waits for them; `partitions` (the run's now) sets the bound.
    pub(super) fn flush(&self, partitions: usize) -> Result<(), RunError> {
        let mut outbox = self.outbox.borrow_mut();
        outbox.set_partitions(partitions);
        outbox.flush(Instant::now(), &mut Self::deliver(&self.handles))
    }

    /// Like [`Shards::flush`], at shutdown: shards whose thread ended are forgotten.
    pub(super) fn flush_stopping(&self) {
        let mut outbox = self.outbox.borrow_mut();
        while let Err(RunError::ShardGone { shard }) =
            outbox.flush(Instant::now(), &mut Self::deliver(&self.handles))
        {
            outbox.forget(shard);
        }
    }

    /// Logs a shard that took no commands for `after` (and when it takes them again), and
    /// returns every shard with commands waiting, for the API.
    pub(super) fn check_stalls(&self, after: Duration) -> Vec<Backlog> {
        let now = Instant::now();
        let mut outbox = self.outbox.borrow_mut();
        for n in outbox.notices(now, after) {
            match n {
                Notice::Stuck {
                    shard,
                    waiting,
                    stalled,
                } => tracing::error!(
                    shard,
                    waiting,
                    "shard {shard} has not taken commands for {} s ({waiting} wait for it); /health/ready fails while it takes none",
                    stalled.as_secs()
                ),
                Notice::Moving { shard } => {
                    tracing::info!(shard, "shard {shard} takes commands again");
                }
            }
        }
        outbox.backlogs(now, Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strait_dataplane::shard::PartitionKey;

    fn pause(p: i32) -> ShardCommand {
        ShardCommand::Pause(PartitionKey::new(0, "t", p))
    }

    fn partition(c: &ShardCommand) -> i32 {
        match c {
            ShardCommand::Pause(k) => k.partition,
            ShardCommand::Lease { .. } => -1,
            ShardCommand::Shutdown => -2,
            _ => -3,
        }
    }

    /// A shard channel of `room` places; what it took, in order.
    struct Channel {
        room: usize,
        took: Vec<(usize, i32)>,
        gone: bool,
    }

    impl Channel {
        fn new(room: usize) -> Channel {
            Channel {
                room,
                took: Vec::new(),
                gone: false,
            }
        }

        fn deliver(
            &mut self,
        ) -> impl FnMut(usize, ShardCommand) -> Result<(), TrySendError<ShardCommand>> + '_
        {
            |shard, cmd| {
                if self.gone {
                    Err(TrySendError::Disconnected(cmd))
                } else if self.room == 0 {
                    Err(TrySendError::Full(cmd))
                } else {
                    self.room -= 1;
                    self.took.push((shard, partition(&cmd)));
                    Ok(())
                }
            }
        }
    }

    #[test]
    fn a_shard_that_never_reads_its_channel_never_blocks_control() {
        let (tx, rx) = crossbeam_channel::bounded(1);
        // Holds its channel open and reads nothing, like a shard stuck in a long operation.
        let thread = std::thread::spawn(move || {
            let _rx = rx;
            std::thread::park_timeout(Duration::from_secs(30));
        });
        let shards = Shards::new(vec![ShardHandle {
            index: 0,
            commands: tx,
            thread,
        }]);
        let started = Instant::now();
        for p in 0..100 {
            shards.send(0, pause(p)).unwrap();
        }
        shards.send(0, ShardCommand::Shutdown).unwrap();
        shards.flush(100).unwrap();
        shards.flush_stopping();
        // A blocking send would wait here until the thread ends (30 s).
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            shards.waiting(0),
            100,
            "one in the channel, the rest in order here"
        );
        assert_eq!(shards.check_stalls(Duration::from_secs(3600)).len(), 1);
    }

    #[test]
    fn a_full_channel_never_blocks_and_every_command_arrives_in_order() {
        let t0 = Instant::now();
        let mut outbox = Outbox::new(2);
        let mut ch = Channel::new(3);
        for p in 0..10 {
            outbox.push(0, pause(p), t0, &mut ch.deliver()).unwrap();
        }
        assert_eq!(outbox.waiting(0), 7);
        // The shard reads its channel: room again, delivered at the next flush.
        ch.room = 4;
        outbox.flush(t0, &mut ch.deliver()).unwrap();
        assert_eq!(outbox.waiting(0), 3);
        // A new command while some wait goes behind them even when the channel has room.
        ch.room = 1;
        outbox.push(0, pause(10), t0, &mut ch.deliver()).unwrap();
        assert_eq!(ch.room, 1, "nothing jumps the queue");
        ch.room = 100;
        outbox.flush(t0, &mut ch.deliver()).unwrap();
        assert_eq!(outbox.waiting(0), 0);
        let order: Vec<i32> = ch.took.iter().map(|(_, p)| *p).collect();
        assert_eq!(order, (0..=10).collect::<Vec<_>>());
    }

    #[test]
    fn shards_have_queues_of_their_own() {
        let t0 = Instant::now();
        let mut outbox = Outbox::new(2);
        let mut full = Channel::new(0);
        outbox.push(0, pause(1), t0, &mut full.deliver()).unwrap();
        let mut open = Channel::new(10);
        // Shard 1 is not held up by shard 0's backlog.
        outbox.push(1, pause(2), t0, &mut open.deliver()).unwrap();
        assert_eq!(open.took, vec![(1, 2)]);
        assert_eq!((outbox.waiting(0), outbox.waiting(1)), (1, 0));
    }

    #[test]
    fn the_backlog_is_bounded_by_the_partitions_of_the_run() {
        let t0 = Instant::now();
        let mut outbox = Outbox::new(1);
        outbox.set_partitions(10);
        let limit = outbox.limit();
        assert_eq!(limit, COMMANDS_PER_PARTITION * 10 + COMMANDS_SLACK);
        let mut ch = Channel::new(0);
        for p in 0..limit {
            outbox
                .push(0, pause(p as i32), t0, &mut ch.deliver())
                .unwrap();
        }
        let later = t0 + Duration::from_secs(90);
        match outbox.push(0, pause(-5), later, &mut ch.deliver()) {
            Err(RunError::ShardStuck {
                shard: 0,
                waiting,
                stalled_s: 90,
            }) => assert_eq!(waiting, limit),
            other => panic!("expected ShardStuck, got {other:?}"),
        }
        assert_eq!(outbox.waiting(0), limit, "nothing beyond the bound is kept");
    }

    #[test]
    fn a_newer_lease_replaces_a_waiting_one() {
        let t0 = Instant::now();
        let mut outbox = Outbox::new(1);
        let mut ch = Channel::new(0);
        let lease = |s| ShardCommand::Lease {
            produce_until: t0 + Duration::from_secs(s),
        };
        outbox.push(0, pause(1), t0, &mut ch.deliver()).unwrap();
        for s in 1..100 {
            outbox.push(0, lease(s), t0, &mut ch.deliver()).unwrap();
        }
        outbox.push(0, pause(2), t0, &mut ch.deliver()).unwrap();
        assert_eq!(outbox.waiting(0), 3);
        ch.room = 10;
        let mut leases = Vec::new();
        outbox
            .flush(t0, &mut |_, c| {
                if let ShardCommand::Lease { produce_until } = c {
                    leases.push(produce_until);
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(leases, vec![t0 + Duration::from_secs(99)]);
    }

    #[test]
    fn a_shard_that_takes_nothing_is_reported_once_then_when_it_moves_again() {
        let t0 = Instant::now();
        let after = Duration::from_secs(60);
        let mut outbox = Outbox::new(2);
        let mut ch = Channel::new(0);
        outbox.push(1, pause(1), t0, &mut ch.deliver()).unwrap();
        outbox.push(1, pause(2), t0, &mut ch.deliver()).unwrap();
        let t = |s| t0 + Duration::from_secs(s);
        // Taking some (not all) is not a stall: the clock starts again.
        ch.room = 1;
        outbox.flush(t(30), &mut ch.deliver()).unwrap();
        outbox.flush(t(80), &mut ch.deliver()).unwrap();
        assert!(outbox.notices(t(80), after).is_empty());
        assert!(outbox.backlogs(t(80), after).is_empty());
        assert_eq!(
            outbox.notices(t(90), after),
            vec![Notice::Stuck {
                shard: 1,
                waiting: 1,
                stalled: Duration::from_secs(60)
            }]
        );
        assert!(outbox.notices(t(95), after).is_empty(), "once per stall");
        assert_eq!(
            outbox.backlogs(t(95), after),
            vec![Backlog {
                shard: 1,
                waiting: 1,
                since: t(30)
            }]
        );
        ch.room = 1;
        outbox.flush(t(100), &mut ch.deliver()).unwrap();
        assert!(outbox.backlogs(t(100), after).is_empty());
        assert_eq!(
            outbox.notices(t(100), after),
            vec![Notice::Moving { shard: 1 }]
        );
    }

    #[test]
    fn a_gone_shard_is_an_error_and_forgetting_it_lets_the_others_flush() {
        let t0 = Instant::now();
        let mut outbox = Outbox::new(2);
        let mut ch = Channel::new(0);
        outbox.push(0, pause(1), t0, &mut ch.deliver()).unwrap();
        outbox.push(1, pause(2), t0, &mut ch.deliver()).unwrap();
        ch.gone = true;
        assert!(matches!(
            outbox.flush(t0, &mut ch.deliver()),
            Err(RunError::ShardGone { shard: 0 })
        ));
        assert!(matches!(
            outbox.push(0, pause(3), t0, &mut Channel::new(0).deliver()),
            Ok(())
        ));
        outbox.forget(0);
        ch.gone = false;
        ch.room = 5;
        outbox.flush(t0, &mut ch.deliver()).unwrap();
        assert_eq!(ch.took, vec![(1, 2)]);
        assert_eq!(outbox.waiting(0), 0);
    }
}
