//! One member's side of Kafka's classic group protocol, as a state machine: time and responses
//! in, requests and events out. The agent (`run::group`) does the IO.
//!
//! Join, then Sync (the leader sends every member's assignment), then a Heartbeat every
//! heartbeat interval. REBALANCE_IN_PROGRESS on a heartbeat means rejoin, keeping what the
//! member holds (incremental cooperative: only what moves is revoked). ILLEGAL_GENERATION and
//! UNKNOWN_MEMBER_ID mean the coordinator gave this member's units to others: [`Event::Fenced`],
//! hold nothing, join again. FENCED_INSTANCE_ID (static membership) means another process took
//! this member's `strait.group.instance.id`: [`Event::Fatal`].
//!
//! The **local session deadline**: a member that has not had a successful answer for
//! `session_timeout - heartbeat_interval` (counted from when the request was sent, so never
//! later than the coordinator's own timer) emits [`Event::Lapsed`] and must stop producing at
//! once, by itself: the coordinator may hand its units to others one heartbeat interval later.
//! A member frozen by SIGSTOP finds the deadline passed when it wakes up, before it writes any
//! progress.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;

/// The member's timings (`strait.group.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub rebalance_timeout: Duration,
    /// Wait before retrying after a transport or coordinator error.
    pub retry_backoff: Duration,
}

impl Timings {
    /// How long after the last successful answer the member still counts itself a member.
    pub fn local_deadline(&self) -> Duration {
        self.session_timeout.saturating_sub(self.heartbeat_interval)
    }
}

/// One member of a JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub metadata: Bytes,
}

/// What the agent must send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// JoinGroup (`member_id` empty on the first join).
    Join {
        member_id: String,
        reason: String,
    },
    /// SyncGroup; `members` is `Some` on the leader, which must send every member's assignment.
    Sync {
        generation: i32,
        member_id: String,
        members: Option<Vec<JoinedMember>>,
    },
    Heartbeat {
        generation: i32,
        member_id: String,
    },
    Leave {
        member_id: String,
    },
}

/// A response, reduced to what the machine needs (`error` is Kafka's error code, 0 for none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Joined {
        error: i16,
        member_id: String,
        generation: i32,
        leader: String,
        members: Vec<JoinedMember>,
    },
    Synced {
        error: i16,
        assignment: Bytes,
    },
    Heartbeat {
        error: i16,
    },
    Left,
    /// The request did not get an answer (connection, timeout, coordinator moved).
    Failed {
        why: String,
    },
}

/// What the host must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A new generation: this member's assignment (bytes of [`super::codec::Assignment`]).
    Assigned {
        generation: i32,
        leader: String,
        member_id: String,
        assignment: Bytes,
    },
    /// The local session deadline passed: stop producing now, hold nothing.
    Lapsed,
    /// The coordinator no longer knows this member in its generation: hold nothing.
    Fenced { why: String },
    /// An error no retry can fix (authorization, an invalid setting): stop.
    Fatal { why: String },
    /// The member left the group.
    Left,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Join at `at`.
    Unjoined {
        at: Instant,
        reason: String,
    },
    AwaitJoin,
    /// Joined; Sync to send.
    Joined {
        generation: i32,
        leader: String,
        members: Option<Vec<JoinedMember>>,
    },
    AwaitSync {
        generation: i32,
        leader: String,
    },
    Stable {
        generation: i32,
        next_heartbeat: Instant,
    },
    AwaitHeartbeat {
        generation: i32,
    },
    Leaving,
    AwaitLeave,
    Done,
}

/// The member's state machine.
#[derive(Debug)]
pub struct Membership {
    timings: Timings,
    state: State,
    member_id: String,
    /// When the request in flight was sent.
    sent_at: Option<Instant>,
    /// When the last request that got a successful answer was sent.
    last_ok: Option<Instant>,
    /// Whether the member holds an assignment the host acts on (cleared by Lapsed/Fenced).
    holding: bool,
    /// A rejoin the host asked for while a request was in flight.
    rejoin: Option<String>,
}

impl Membership {
    pub fn new(timings: Timings, now: Instant) -> Membership {
        Membership {
            timings,
            state: State::Unjoined {
                at: now,
                reason: "start".into(),
            },
            member_id: String::new(),
            sent_at: None,
            last_ok: None,
            holding: false,
            rejoin: None,
        }
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The generation this member is stable in, if it is.
    pub fn generation(&self) -> Option<i32> {
        match &self.state {
            State::Stable { generation, .. } | State::AwaitHeartbeat { generation } => {
                Some(*generation)
            }
            _ => None,
        }
    }

    /// Whether the member is in a generation with no rebalance asked for or under way.
    pub fn is_stable(&self) -> bool {
        self.generation().is_some() && self.rejoin.is_none()
    }

    /// Whether the member may still produce: it holds an assignment and its local session
    /// deadline has not passed.
    pub fn is_live(&self, now: Instant) -> bool {
        self.holding
            && self
                .last_ok
                .is_some_and(|t| now < t + self.timings.local_deadline())
    }

    /// Until when the member may produce (None: it holds nothing).
    pub fn live_until(&self) -> Option<Instant> {
        self.holding
            .then(|| self.last_ok.map(|t| t + self.timings.local_deadline()))
            .flatten()
    }

    /// Asks for a rebalance (units changed, or revoked units are released).
    pub fn rejoin(&mut self, reason: &str, now: Instant) {
        match &self.state {
            State::Stable { .. } => {
                self.state = State::Unjoined {
                    at: now,
                    reason: reason.to_string(),
                }
            }
            State::Unjoined { .. } | State::Leaving | State::AwaitLeave | State::Done => {}
            _ => self.rejoin = Some(reason.to_string()),
        }
    }

    /// Leaves the group at the next poll.
    pub fn leave(&mut self) {
        self.state = if self.member_id.is_empty() {
            State::Done
        } else {
            State::Leaving
        };
        self.holding = false;
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// When [`Membership::poll`] next has something to do (None: waiting for a response).
    pub fn next_wakeup(&self) -> Option<Instant> {
        let deadline = self
            .holding
            .then(|| self.last_ok.map(|t| t + self.timings.local_deadline()))
            .flatten();
        let state = match &self.state {
            State::Unjoined { at, .. } => Some(*at),
            State::Stable { next_heartbeat, .. } => Some(*next_heartbeat),
            _ => None,
        };
        match (deadline, state) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The events due at `now` and the request to send, if any (at most one in flight).
    pub fn poll(&mut self, now: Instant) -> (Vec<Event>, Option<Request>) {
        let mut events = Vec::new();
        if self.holding && !self.is_live(now) {
            self.holding = false;
            events.push(Event::Lapsed);
        }
        let req = match std::mem::replace(&mut self.state, State::Done) {
            State::Unjoined { at, reason } if now >= at => {
                self.state = State::AwaitJoin;
                Some(Request::Join {
                    member_id: self.member_id.clone(),
                    reason,
                })
            }
            State::Joined {
                generation,
                leader,
                members,
            } => {
                self.state = State::AwaitSync { generation, leader };
                Some(Request::Sync {
                    generation,
                    member_id: self.member_id.clone(),
                    members,
                })
            }
            State::Stable {
                generation,
                next_heartbeat,
            } if now >= next_heartbeat => {
                self.state = State::AwaitHeartbeat { generation };
                Some(Request::Heartbeat {
                    generation,
                    member_id: self.member_id.clone(),
                })
            }
            State::Leaving => {
                self.state = State::AwaitLeave;
                Some(Request::Leave {
                    member_id: self.member_id.clone(),
                })
            }
            other => {
                self.state = other;
                None
            }
        };
        if req.is_some() {
            self.sent_at = Some(now);
        }
        (events, req)
    }

    /// Applies the answer to the request in flight.
    pub fn on_response(&mut self, resp: Response, now: Instant) -> Vec<Event> {
        let sent = self.sent_at.take().unwrap_or(now);
        let mut events = Vec::new();
        let state = std::mem::replace(&mut self.state, State::Done);
        match (state, resp) {
            (State::AwaitLeave, _) => {
                self.state = State::Done;
                events.push(Event::Left);
            }
            (_, Response::Failed { why }) => {
                tracing::debug!("group request failed: {why}");
                self.retry(now, &why);
            }
            (
                State::AwaitJoin,
                Response::Joined {
                    error,
                    member_id,
                    generation,
                    leader,
                    members,
                },
            ) => {
                if !member_id.is_empty() {
                    self.member_id = member_id;
                }
                if error == 0 {
                    self.last_ok = Some(sent);
                    let is_leader = leader == self.member_id;
                    self.state = State::Joined {
                        generation,
                        leader,
                        members: is_leader.then_some(members),
                    };
                } else {
                    self.on_error(error, now, &mut events);
                }
            }
            (State::AwaitSync { generation, leader }, Response::Synced { error, assignment }) => {
                if error == 0 {
                    self.last_ok = Some(sent);
                    self.holding = true;
                    events.push(Event::Assigned {
                        generation,
                        leader,
                        member_id: self.member_id.clone(),
                        assignment,
                    });
                    self.stable(generation, now);
                } else {
                    self.on_error(error, now, &mut events);
                }
            }
            (State::AwaitHeartbeat { generation }, Response::Heartbeat { error }) => {
                if error == 0 {
                    self.last_ok = Some(sent);
                    self.stable(generation, now);
                } else {
                    self.on_error(error, now, &mut events);
                }
            }
            (other, resp) => {
                tracing::debug!(?resp, "group response in an unexpected state; ignored");
                self.state = other;
            }
        }
        events
    }

    fn stable(&mut self, generation: i32, now: Instant) {
        self.state = match self.rejoin.take() {
            Some(reason) => State::Unjoined { at: now, reason },
            None => State::Stable {
                generation,
                next_heartbeat: now + self.timings.heartbeat_interval,
            },
        };
    }

    fn retry(&mut self, now: Instant, reason: &str) {
        self.state = State::Unjoined {
            at: now + self.timings.retry_backoff,
            reason: reason.to_string(),
        };
    }

    fn on_error(&mut self, code: i16, now: Instant, events: &mut Vec<Event>) {
        let error = ResponseError::try_from_code(code);
        let name = error.map_or_else(|| format!("error {code}"), |e| format!("{e:?}"));
        match error {
            Some(ResponseError::MemberIdRequired) => {
                self.state = State::Unjoined {
                    at: now,
                    reason: "member id assigned".into(),
                };
            }
            Some(ResponseError::RebalanceInProgress) => {
                self.rejoin = None;
                self.state = State::Unjoined {
                    at: now,
                    reason: "the group is rebalancing".into(),
                };
            }
            // Only a static member gets it: another process joined with the same
            // `strait.group.instance.id` and took this member's place. Joining again would
            // fence that one in turn, and so on: stop, and say why.
            Some(ResponseError::FencedInstanceId) => {
                self.holding = false;
                events.push(Event::Fatal {
                    why: format!(
                        "{name}: another process joined the group with this member's strait.group.instance.id (each instance needs its own)"
                    ),
                });
                self.state = State::Done;
            }
            Some(ResponseError::IllegalGeneration | ResponseError::UnknownMemberId) => {
                if error == Some(ResponseError::UnknownMemberId) {
                    self.member_id.clear();
                }
                self.rejoin = None;
                if self.holding {
                    self.holding = false;
                }
                events.push(Event::Fenced { why: name.clone() });
                self.state = State::Unjoined {
                    at: now,
                    reason: name,
                };
            }
            Some(
                ResponseError::CoordinatorNotAvailable
                | ResponseError::NotCoordinator
                | ResponseError::CoordinatorLoadInProgress,
            ) => self.retry(now, &name),
            Some(e) if e.is_retriable() => self.retry(now, &name),
            _ => {
                self.holding = false;
                events.push(Event::Fatal { why: name });
                self.state = State::Done;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[allow(clippy::disallowed_methods)] // a test needs some instant to start from
    fn start() -> Instant {
        Instant::now()
    }

    fn timings() -> Timings {
        Timings {
            session_timeout: Duration::from_secs(6),
            heartbeat_interval: Duration::from_secs(1),
            rebalance_timeout: Duration::from_secs(10),
            retry_backoff: Duration::from_millis(200),
        }
    }

    fn joined(member: &str, leader: &str) -> Response {
        Response::Joined {
            error: 0,
            member_id: member.into(),
            generation: 1,
            leader: leader.into(),
            members: vec![],
        }
    }

    /// Drives a first join to Stable; returns the events of the sync.
    fn join(m: &mut Membership, t: Instant) -> Vec<Event> {
        let (_, req) = m.poll(t);
        assert!(matches!(req, Some(Request::Join { .. })));
        assert!(m.on_response(joined("m1", "m1"), t).is_empty());
        let (_, req) = m.poll(t);
        assert!(matches!(
            req,
            Some(Request::Sync {
                members: Some(_),
                ..
            })
        ));
        m.on_response(
            Response::Synced {
                error: 0,
                assignment: Bytes::from_static(b"x"),
            },
            t,
        )
    }

    #[test]
    fn join_sync_then_heartbeats_every_interval() {
        let t0 = start();
        let mut m = Membership::new(timings(), t0);
        let ev = join(&mut m, t0);
        assert!(matches!(&ev[..], [Event::Assigned { generation: 1, .. }]));
        assert!(m.is_live(t0));
        assert_eq!(m.poll(t0 + Duration::from_millis(500)).1, None);
        let (_, req) = m.poll(t0 + Duration::from_secs(1));
        assert!(matches!(
            req,
            Some(Request::Heartbeat { generation: 1, .. })
        ));
    }

    #[test]
    fn rebalance_in_progress_rejoins_and_keeps_the_units() {
        let t0 = start();
        let mut m = Membership::new(timings(), t0);
        join(&mut m, t0);
        let t1 = t0 + Duration::from_secs(1);
        m.poll(t1);
        let ev = m.on_response(Response::Heartbeat { error: 27 }, t1);
        assert!(ev.is_empty());
        assert!(m.is_live(t1));
        assert!(matches!(m.poll(t1).1, Some(Request::Join { member_id, .. }) if member_id == "m1"));
    }

    #[test]
    fn stable_only_in_a_generation_with_no_rejoin_asked_for_or_under_way() {
        let t0 = start();
        let mut m = Membership::new(timings(), t0);
        assert!(!m.is_stable(), "not joined yet");
        join(&mut m, t0);
        assert!(m.is_stable());
        // A rejoin asked for while a heartbeat is in flight waits for its answer.
        let t1 = t0 + Duration::from_secs(1);
        assert!(matches!(m.poll(t1).1, Some(Request::Heartbeat { .. })));
        m.rejoin("the set of partitions changed", t1);
        assert!(!m.is_stable());
        assert!(
            m.on_response(Response::Heartbeat { error: 0 }, t1)
                .is_empty()
        );
        assert!(matches!(m.poll(t1).1, Some(Request::Join { .. })));
        assert!(!m.is_stable(), "rejoining");
        // REBALANCE_IN_PROGRESS on a heartbeat: a rejoin under way.
        let mut m = Membership::new(timings(), t0);
        join(&mut m, t0);
        m.poll(t1);
        m.on_response(Response::Heartbeat { error: 27 }, t1);
        assert!(!m.is_stable());
    }

    #[test]
    fn a_fenced_member_holds_nothing_and_forgets_an_unknown_id() {
        let t0 = start();
        let mut m = Membership::new(timings(), t0);
        join(&mut m, t0);
        let t1 = t0 + Duration::from_secs(1);
        m.poll(t1);
        let ev = m.on_response(Response::Heartbeat { error: 25 }, t1);
        assert!(matches!(&ev[..], [Event::Fenced { .. }]));
        assert!(!m.is_live(t1));
        assert!(
            matches!(m.poll(t1).1, Some(Request::Join { member_id, .. }) if member_id.is_empty())
        );
    }

    #[test]
    fn a_static_member_replaced_by_another_process_stops() {
        let t0 = start();
        let mut m = Membership::new(timings(), t0);
        join(&mut m, t0);
        let t1 = t0 + Duration::from_secs(1);
        m.poll(t1);
        // FENCED_INSTANCE_ID: rejoining would fence the other process in turn.
        let ev = m.on_response(Response::Heartbeat { error: 82 }, t1);
        assert!(
            matches!(&ev[..], [Event::Fatal { why }] if why.contains("strait.group.instance.id")),
            "{ev:?}"
        );
        assert!(!m.is_live(t1));
        assert_eq!(m.poll(t1 + Duration::from_secs(5)).1, None);
    }

    #[test]
    fn the_local_deadline_lapses_before_the_coordinators() {
        let t0 = start();
        let mut m = Membership::new(timings(), t0);
        join(&mut m, t0);
        // Frozen (SIGSTOP) for longer than the session: the first poll after waking lapses.
        let late = t0 + Duration::from_secs(30);
        let (ev, _) = m.poll(late);
        assert_eq!(ev, vec![Event::Lapsed]);
        assert!(!m.is_live(late));
        // Lapsed once, not at every poll.
        assert!(m.poll(late).0.is_empty());
    }

    #[test]
    fn authorization_errors_are_fatal() {
        let t0 = start();
        let mut m = Membership::new(timings(), t0);
        m.poll(t0);
        let ev = m.on_response(
            Response::Joined {
                error: 30,
                member_id: String::new(),
                generation: -1,
                leader: String::new(),
                members: vec![],
            },
            t0,
        );
        assert!(matches!(&ev[..], [Event::Fatal { .. }]));
    }

    /// A seeded simulation: a coordinator that answers at random (ok, rebalance, fenced,
    /// lost), with random delays. Whatever happens: at most one request in flight, heartbeats
    /// at the interval, and the member never counts itself live past its local deadline.
    #[derive(Debug, Clone)]
    enum Fate {
        Ok,
        Rebalance,
        Fenced,
        Lost,
    }

    fn fate() -> impl Strategy<Value = Fate> {
        prop_oneof![
            6 => Just(Fate::Ok),
            1 => Just(Fate::Rebalance),
            1 => Just(Fate::Fenced),
            1 => Just(Fate::Lost),
        ]
    }

    proptest! {
        #[test]
        fn simulation_keeps_the_invariants(steps in prop::collection::vec((fate(), 0u64..8_000), 1..200)) {
            let t = timings();
            let t0 = start();
            let mut now = t0;
            let mut m = Membership::new(t, t0);
            let mut last_ok_sent: Option<Instant> = None;
            for (fate, delay) in steps {
                let (_, req) = m.poll(now);
                let Some(req) = req else {
                    now = m.next_wakeup().unwrap_or(now).max(now);
                    continue;
                };
                prop_assert!(m.poll(now).1.is_none(), "two requests in flight");
                let sent = now;
                now += Duration::from_millis(delay);
                let code = match fate { Fate::Ok => 0, Fate::Rebalance => 27, Fate::Fenced => 22, Fate::Lost => -100 };
                let resp = match (&req, code) {
                    (_, -100) => Response::Failed { why: "lost".into() },
                    (Request::Join { .. }, c) => Response::Joined { error: c, member_id: "m".into(), generation: 3, leader: "m".into(), members: vec![] },
                    (Request::Sync { .. }, c) => Response::Synced { error: c, assignment: Bytes::new() },
                    (Request::Heartbeat { .. }, c) => Response::Heartbeat { error: c },
                    (Request::Leave { .. }, _) => Response::Left,
                };
                if code == 0 {
                    last_ok_sent = Some(sent);
                }
                m.on_response(resp, now);
                if m.is_live(now) {
                    let ok = last_ok_sent.unwrap();
                    prop_assert!(now < ok + t.local_deadline());
                }
                now += Duration::from_millis(delay / 2);
            }
        }
    }
}
