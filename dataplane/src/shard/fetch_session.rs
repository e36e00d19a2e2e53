//! Fetch sessions (KIP-227, incremental fetch): the client side, one per fetch group.
//!
//! A full fetch names every partition and, at session epoch 0, asks the broker to keep them in a
//! session. The broker answers with the session's id, and every later fetch of the group names
//! only the partitions added or changed since (a new fetch offset, leader epoch, last fetched
//! epoch or size) and lists the ones to forget. The broker reads the partitions left out at the
//! parameters it holds, and answers only the partitions with something new: records, a moved high
//! watermark or log start offset, an error, a diverging epoch. At 10 000 idle partitions a full
//! fetch is about 250 KiB each way; an incremental one a few dozen bytes.
//!
//! The broker's view must be exactly ours, or it reads a partition from an offset we no longer
//! fetch at. So [`FetchSession::build`] records the parameters it sends as it sends them, and
//! anything that leaves the broker's view in doubt sends the next fetch full (epoch 0, closing
//! the old session and opening a new one): an error in the answer (FETCH_SESSION_ID_NOT_FOUND,
//! INVALID_FETCH_SESSION_EPOCH or any other), a request lost, abandoned or timed out, a lost
//! connection ([`FetchSession::handle_failure`]), or a partition whose state was replaced while
//! in the session ([`FetchSession::reset`]).
//!
//! A broker that keeps no session (its cache is full, or it predates Fetch v7, where the driver
//! strips the session fields) answers with session id 0. The group then fetches without a session
//! (epoch -1, nothing asked of the broker's cache) and asks again after
//! [`SESSIONLESS_RETRY`].
//!
//! Sans-IO and bounded: the state is the map of the partitions in the session, no larger than
//! the group; the core parks a group's session when the group goes away (it keeps the id only, to
//! close the session on the broker with its next full fetch). Apache Kafka's
//! `FetchSessionHandler` (clients) and `FetchSession` (server) are the reference for the
//! behaviour; this is our own code.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::channel::PartitionKey;

/// FETCH_SESSION_ID_NOT_FOUND: the broker has no session of that id (evicted, expired, or it
/// restarted).
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// INVALID_FETCH_SESSION_EPOCH: the session exists, but the request's epoch is not the next.
pub const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

/// How long a group whose broker made no session fetches without one before asking again (a
/// full session cache may have room again).
pub const SESSIONLESS_RETRY: Duration = Duration::from_secs(60);

/// What a fetch asks of one partition: the session holds these for partitions not named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionAsk {
    pub fetch_offset: i64,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
    pub max_bytes: i32,
}

/// The session fields of one Fetch request, and which partitions it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRequest {
    pub session_id: i32,
    pub session_epoch: i32,
    /// Whether the request names every wanted partition (epoch 0 or -1).
    pub full: bool,
    /// The partitions to name, in the order wanted: all of them in a full fetch, those added
    /// or changed since the session last saw them in an incremental one.
    pub send: Vec<PartitionKey>,
    /// The partitions to drop from the session (`forgotten_topics_data`).
    pub forget: Vec<PartitionKey>,
}

/// What the next fetch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A full fetch at epoch 0 that opens a session, closing session `close` (0: none) on the
    /// broker first.
    Open { close: i32 },
    /// An incremental fetch in session `id` at `epoch`.
    Incremental { id: i32, epoch: i32 },
    /// Full fetches without a session (epoch -1) until `retry_at`.
    Sessionless { retry_at: Instant },
}

/// The result of an answer, for counters and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The session goes on (or was opened): the next fetch is incremental.
    Continue,
    /// The broker keeps no session for us: full fetches without one for a while.
    NoSession,
    /// The answer ended the session: the next fetch is full and opens a new one.
    Reset,
    /// The answer is for another session than the request's: the broker read the partitions
    /// at parameters we did not send, so its records must not be taken. Starts over.
    Foreign,
}

/// A partition in the session: what was last sent for it, and the last build that wanted it.
#[derive(Debug, Clone, Copy)]
struct Held {
    ask: PartitionAsk,
    wanted_in: u64,
}

/// The client side of one fetch group's session.
#[derive(Debug)]
pub struct FetchSession {
    mode: Mode,
    partitions: HashMap<PartitionKey, Held>,
    /// The session id and epoch of the request in flight (at most one per group).
    in_flight: Option<(i32, i32)>,
    /// [`FetchSession::reset`] came while a request was in flight: its answer cannot continue
    /// the session.
    stale: bool,
    builds: u64,
}

impl Default for FetchSession {
    fn default() -> Self {
        FetchSession {
            mode: Mode::Open { close: 0 },
            partitions: HashMap::new(),
            in_flight: None,
            stale: false,
            builds: 0,
        }
    }
}

impl FetchSession {
    /// Whether the session holds `key`: the broker may answer for it although the request
    /// did not name it.
    pub fn holds(&self, key: &PartitionKey) -> bool {
        self.partitions.contains_key(key)
    }

    /// The partitions the session holds (what a fetch in flight covers).
    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// What the session holds for `key`, as last sent.
    pub fn ask(&self, key: &PartitionKey) -> Option<PartitionAsk> {
        self.partitions.get(key).map(|h| h.ask)
    }

    /// Whether a request is in flight.
    pub fn in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Whether the next request will be full.
    pub fn next_is_full(&self, now: Instant) -> bool {
        !matches!(self.mode_at(now), Mode::Incremental { .. })
    }

    fn mode_at(&self, now: Instant) -> Mode {
        match self.mode {
            Mode::Sessionless { retry_at } if now >= retry_at => Mode::Open { close: 0 },
            m => m,
        }
    }

    /// The next request of the group, for the partitions it wants now (in order), and from now
    /// on the session's view: exactly what was sent. The request must be answered through
    /// [`FetchSession::handle_response`] or [`FetchSession::handle_failure`] before the next.
    pub fn build(
        &mut self,
        wanted: &[(PartitionKey, PartitionAsk)],
        now: Instant,
    ) -> SessionRequest {
        debug_assert!(self.in_flight.is_none(), "one fetch per group at a time");
        self.builds += 1;
        let mode = self.mode_at(now);
        self.mode = mode;
        let (session_id, session_epoch) = match mode {
            Mode::Open { close } => (close, 0),
            Mode::Incremental { id, epoch } => (id, epoch),
            Mode::Sessionless { .. } => (0, -1),
        };
        self.in_flight = Some((session_id, session_epoch));
        if session_epoch <= 0 {
            self.partitions.clear();
            let build = self.builds;
            self.partitions.extend(wanted.iter().map(|(k, ask)| {
                let held = Held {
                    ask: *ask,
                    wanted_in: build,
                };
                (k.clone(), held)
            }));
            return SessionRequest {
                session_id,
                session_epoch,
                full: true,
                send: wanted.iter().map(|(k, _)| k.clone()).collect(),
                forget: Vec::new(),
            };
        }
        let (send, forget) = self.diff(wanted);
        SessionRequest {
            session_id,
            session_epoch,
            full: false,
            send,
            forget,
        }
    }

    /// The partitions added or changed (and records them), and those no longer wanted
    /// (and drops them).
    fn diff(
        &mut self,
        wanted: &[(PartitionKey, PartitionAsk)],
    ) -> (Vec<PartitionKey>, Vec<PartitionKey>) {
        let build = self.builds;
        let mut send = Vec::new();
        for (k, ask) in wanted {
            match self.partitions.get_mut(k) {
                Some(h) => {
                    h.wanted_in = build;
                    if h.ask != *ask {
                        h.ask = *ask;
                        send.push(k.clone());
                    }
                }
                None => {
                    let held = Held {
                        ask: *ask,
                        wanted_in: build,
                    };
                    self.partitions.insert(k.clone(), held);
                    send.push(k.clone());
                }
            }
        }
        let mut forget = Vec::new();
        self.partitions.retain(|k, h| {
            let keep = h.wanted_in == build;
            if !keep {
                forget.push(k.clone());
            }
            keep
        });
        (send, forget)
    }

    /// The answer to the request in flight: its top-level error code, its session id, its
    /// throttle time and how many partitions it named.
    pub fn handle_response(
        &mut self,
        error_code: i16,
        session_id: i32,
        throttle_ms: i32,
        answered: usize,
        now: Instant,
    ) -> Answer {
        let answer = self.take_answer(error_code, session_id, throttle_ms, answered, now);
        match (std::mem::take(&mut self.stale), self.mode) {
            (true, Mode::Incremental { id, .. }) if answer != Answer::Foreign => self.restart(id),
            _ => answer,
        }
    }

    fn take_answer(
        &mut self,
        error_code: i16,
        session_id: i32,
        throttle_ms: i32,
        answered: usize,
        now: Instant,
    ) -> Answer {
        let Some((sent_id, sent_epoch)) = self.in_flight.take() else {
            return self.restart(0); // not ours to interpret (cannot happen: one per group)
        };
        if error_code != 0 {
            // Without the session the broker knows nothing; otherwise close it and start over.
            let close = if error_code == FETCH_SESSION_ID_NOT_FOUND {
                0
            } else {
                sent_id
            };
            return self.restart(close);
        }
        match sent_epoch {
            -1 => Answer::NoSession, // a sessionless fetch; the mode says when to ask again
            0 if session_id != 0 => {
                self.mode = Mode::Incremental {
                    id: session_id,
                    epoch: 1,
                };
                Answer::Continue
            }
            0 if throttle_ms > 0 && answered == 0 => {
                // KIP-219: a throttled full fetch is answered empty, without opening a session.
                self.restart(0)
            }
            0 => {
                self.mode = Mode::Sessionless {
                    retry_at: now + SESSIONLESS_RETRY,
                };
                Answer::NoSession
            }
            _ if session_id == sent_id => {
                self.mode = Mode::Incremental {
                    id: sent_id,
                    epoch: next_epoch(sent_epoch),
                };
                Answer::Continue
            }
            // The broker closed the session (Kafka's clients take the answer and start over).
            _ if session_id == 0 => self.restart(0),
            _ => {
                self.restart(sent_id);
                Answer::Foreign
            }
        }
    }

    /// The request in flight was lost: not sent, failed, abandoned with its connection or
    /// timed out. Whether the broker applied it is unknown, so the next fetch is full. Returns
    /// whether that ended a session (the lost request was incremental).
    pub fn handle_failure(&mut self) -> bool {
        self.stale = false;
        let in_flight = self.in_flight.take();
        let ended = matches!(in_flight, Some((_, epoch)) if epoch > 0)
            || matches!(self.mode, Mode::Incremental { .. });
        let close = match (in_flight, self.mode) {
            (Some((id, _)), _) | (None, Mode::Incremental { id, .. }) => id,
            (None, _) => 0,
        };
        self.restart(close);
        ended
    }

    /// Sends the next fetch full: a partition's state was replaced while in the session (the
    /// broker holds high watermarks the new state never saw, and would not answer them again).
    /// Returns whether that ended a session now; with a request in flight, its answer does
    /// ([`Answer::Reset`]).
    pub fn reset(&mut self) -> bool {
        if self.in_flight.is_some() {
            // The answer may continue or open a session holding the old state.
            self.stale = true;
        } else if let Mode::Incremental { id, .. } = self.mode {
            self.mode = Mode::Open { close: id };
            return true;
        }
        // Otherwise the next fetch is full already.
        false
    }

    /// The group has no partition to fetch (paused, failed, moved to other brokers): forgets
    /// them, and remembers the session's id for the next full fetch to close on the broker,
    /// whose cache has room for a bounded number of sessions shared by every client. Returns
    /// whether there is anything to remember (else the session may be dropped). Not with a
    /// request in flight.
    pub fn park(&mut self) -> bool {
        debug_assert!(self.in_flight.is_none(), "parked with a fetch in flight");
        self.partitions = HashMap::new();
        self.stale = false;
        if let Mode::Incremental { id, .. } = self.mode {
            self.mode = Mode::Open { close: id };
        }
        matches!(self.mode, Mode::Open { close } if close != 0)
    }

    fn restart(&mut self, close: i32) -> Answer {
        self.mode = Mode::Open { close };
        Answer::Reset
    }
}

/// The epoch after `epoch` (Kafka's `FetchMetadata.nextEpoch`): 1 after `i32::MAX`, as 0 opens
/// and -1 closes a session.
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX { 1 } else { epoch + 1 }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn key(p: i32) -> PartitionKey {
        PartitionKey::new(0, "t", p)
    }

    fn ask(offset: i64) -> PartitionAsk {
        PartitionAsk {
            fetch_offset: offset,
            current_leader_epoch: 3,
            last_fetched_epoch: 2,
            max_bytes: 1 << 20,
        }
    }

    fn wanted(offsets: &[(i32, i64)]) -> Vec<(PartitionKey, PartitionAsk)> {
        offsets.iter().map(|(p, o)| (key(*p), ask(*o))).collect()
    }

    fn names(keys: &[PartitionKey]) -> Vec<i32> {
        keys.iter().map(|k| k.partition).collect()
    }

    impl FetchSession {
        fn view(&self) -> HashMap<PartitionKey, PartitionAsk> {
            self.partitions
                .iter()
                .map(|(k, h)| (k.clone(), h.ask))
                .collect()
        }
    }

    #[test]
    fn a_session_opens_full_then_names_only_what_changed() {
        let now = Instant::now();
        let mut s = FetchSession::default();
        let r = s.build(&wanted(&[(0, 10), (1, 20), (2, 30)]), now);
        assert_eq!((r.session_id, r.session_epoch, r.full), (0, 0, true));
        assert_eq!(names(&r.send), [0, 1, 2]);
        assert_eq!(s.handle_response(0, 77, 0, 3, now), Answer::Continue);

        // Nothing changed: an empty incremental fetch.
        let r = s.build(&wanted(&[(0, 10), (1, 20), (2, 30)]), now);
        assert_eq!((r.session_id, r.session_epoch, r.full), (77, 1, false));
        assert!(r.send.is_empty() && r.forget.is_empty());
        assert_eq!(s.handle_response(0, 77, 0, 0, now), Answer::Continue);

        // p1 moved on, p2 is no longer wanted (paused, moved, waiting for memory), p3 is new.
        let r = s.build(&wanted(&[(3, 0), (0, 10), (1, 25)]), now);
        assert_eq!((r.session_id, r.session_epoch), (77, 2));
        assert_eq!(names(&r.send), [3, 1]);
        assert_eq!(names(&r.forget), [2]);
        assert!(s.holds(&key(3)) && !s.holds(&key(2)));
        assert_eq!(s.ask(&key(1)), Some(ask(25)));
        assert_eq!(s.handle_response(0, 77, 0, 1, now), Answer::Continue);

        // A new leader epoch or size is sent too.
        let mut w = wanted(&[(3, 0), (0, 10), (1, 25)]);
        w[1].1.current_leader_epoch = 4;
        w[2].1.max_bytes = 2 << 20;
        let r = s.build(&w, now);
        assert_eq!(names(&r.send), [0, 1]);
        assert_eq!(r.session_epoch, 3);
    }

    #[test]
    fn session_errors_start_over_with_a_full_fetch() {
        let now = Instant::now();
        let w = wanted(&[(0, 10), (1, 20)]);
        let mut s = FetchSession::default();
        s.build(&w, now);
        s.handle_response(0, 5, 0, 2, now);
        s.build(&w, now);
        // The broker lost the session: open a new one, nothing to close.
        assert_eq!(
            s.handle_response(FETCH_SESSION_ID_NOT_FOUND, 0, 0, 0, now),
            Answer::Reset
        );
        let r = s.build(&w, now);
        assert_eq!((r.session_id, r.session_epoch, r.full), (0, 0, true));
        assert_eq!(names(&r.send), [0, 1]);
        s.handle_response(0, 6, 0, 2, now);
        s.build(&w, now);
        // A wrong epoch (or any other error): close the session and open a new one.
        assert_eq!(
            s.handle_response(INVALID_FETCH_SESSION_EPOCH, 6, 0, 0, now),
            Answer::Reset
        );
        let r = s.build(&w, now);
        assert_eq!((r.session_id, r.session_epoch, r.full), (6, 0, true));
        s.handle_response(0, 7, 0, 2, now);
        s.build(&w, now);
        // A lost request: the broker may or may not have applied it.
        s.handle_failure();
        let r = s.build(&w, now);
        assert_eq!((r.session_id, r.session_epoch, r.full), (7, 0, true));
        assert_eq!(names(&r.send), [0, 1]);
        // The broker closed the session in an answer (id 0 to an incremental fetch).
        s.handle_response(0, 8, 0, 2, now);
        s.build(&w, now);
        assert_eq!(s.handle_response(0, 0, 0, 0, now), Answer::Reset);
        assert!(s.build(&w, now).full);
        // An answer for another session is not ours to take.
        s.handle_response(0, 9, 0, 2, now);
        s.build(&w, now);
        assert_eq!(s.handle_response(0, 10, 0, 2, now), Answer::Foreign);
        let r = s.build(&w, now);
        assert_eq!((r.session_id, r.session_epoch, r.full), (9, 0, true));
    }

    #[test]
    fn a_broker_without_sessions_gets_full_fetches_and_is_asked_again_later() {
        let now = Instant::now();
        let w = wanted(&[(0, 10), (1, 20)]);
        let mut s = FetchSession::default();
        s.build(&w, now);
        assert_eq!(s.handle_response(0, 0, 0, 2, now), Answer::NoSession);
        for i in 1..5 {
            let at = now + Duration::from_secs(i);
            let r = s.build(&w, at);
            assert_eq!((r.session_id, r.session_epoch, r.full), (0, -1, true));
            assert_eq!(names(&r.send), [0, 1]);
            assert_eq!(s.handle_response(0, 0, 0, 2, at), Answer::NoSession);
        }
        let later = now + SESSIONLESS_RETRY;
        let r = s.build(&w, later);
        assert_eq!((r.session_id, r.session_epoch), (0, 0));
        assert_eq!(s.handle_response(0, 9, 0, 2, later), Answer::Continue);
        assert!(!s.build(&w, later).full);
    }

    #[test]
    fn a_throttled_empty_full_answer_asks_again_at_once() {
        let now = Instant::now();
        let w = wanted(&[(0, 10)]);
        let mut s = FetchSession::default();
        s.build(&w, now);
        assert_eq!(s.handle_response(0, 0, 100, 0, now), Answer::Reset);
        let r = s.build(&w, now);
        assert_eq!((r.session_id, r.session_epoch), (0, 0));
    }

    #[test]
    fn a_replaced_partition_state_sends_the_next_fetch_full_even_with_a_fetch_in_flight() {
        let now = Instant::now();
        let w = wanted(&[(0, 10), (1, 20)]);
        let mut s = FetchSession::default();
        s.build(&w, now);
        s.handle_response(0, 5, 0, 2, now);
        s.reset();
        let r = s.build(&w, now);
        assert_eq!((r.session_id, r.session_epoch, r.full), (5, 0, true));
        s.handle_response(0, 6, 0, 2, now);
        s.build(&w, now);
        s.reset(); // while the incremental fetch is in flight
        assert_eq!(s.handle_response(0, 6, 0, 0, now), Answer::Reset);
        let r = s.build(&w, now);
        assert_eq!((r.session_id, r.session_epoch, r.full), (6, 0, true));
    }

    #[test]
    fn a_parked_session_is_closed_by_the_next_full_fetch() {
        let now = Instant::now();
        let w = wanted(&[(0, 10), (1, 20)]);
        let mut s = FetchSession::default();
        s.build(&w, now);
        s.handle_response(0, 5, 0, 2, now);
        assert!(s.park(), "session 5 is still open on the broker");
        assert!(s.is_empty() && s.next_is_full(now));
        assert!(s.park(), "parked again: still to close");
        let r = s.build(&w, now);
        assert_eq!((r.session_id, r.session_epoch, r.full), (5, 0, true));
        assert_eq!(names(&r.send), [0, 1]);
        // Without a session to close there is nothing to keep.
        assert!(!FetchSession::default().park());
    }

    #[test]
    fn only_what_ends_a_session_counts_as_a_reset() {
        let now = Instant::now();
        let w = wanted(&[(0, 10), (1, 20)]);
        let mut s = FetchSession::default();
        // A lost incremental fetch ends its session, a lost opening one none.
        s.build(&w, now);
        s.handle_response(0, 6, 0, 2, now);
        s.build(&w, now);
        assert!(s.handle_failure());
        s.build(&w, now);
        assert!(!s.handle_failure());
        // A replaced state ends a session at once only with nothing in flight (else the
        // answer does, as a reset).
        s.build(&w, now);
        s.handle_response(0, 7, 0, 2, now);
        assert!(s.reset());
        assert!(!s.reset());
        s.build(&w, now);
        s.handle_response(0, 8, 0, 2, now);
        s.build(&w, now);
        assert!(!s.reset());
        assert_eq!(s.handle_response(0, 8, 0, 0, now), Answer::Reset);
    }

    #[test]
    fn the_epoch_wraps_to_one() {
        assert_eq!(next_epoch(1), 2);
        assert_eq!(next_epoch(i32::MAX), 1);
    }

    /// A broker's session cache as Kafka's `FetchManager` keeps it, reduced to what the client
    /// can see.
    #[derive(Default)]
    struct Broker {
        sessions: HashMap<i32, (i32, HashMap<PartitionKey, PartitionAsk>)>,
        next_id: i32,
    }

    impl Broker {
        /// Applies a request; returns (error code, session id).
        fn fetch(
            &mut self,
            r: &SessionRequest,
            asks: &HashMap<PartitionKey, PartitionAsk>,
            cache_full: bool,
        ) -> (i16, i32) {
            let named: HashMap<PartitionKey, PartitionAsk> =
                r.send.iter().map(|k| (k.clone(), asks[k])).collect();
            if r.session_epoch <= 0 {
                self.sessions.remove(&r.session_id);
                if r.session_epoch < 0 || cache_full {
                    return (0, 0);
                }
                self.next_id += 1;
                self.sessions.insert(self.next_id, (1, named));
                return (0, self.next_id);
            }
            let Some((epoch, parts)) = self.sessions.get_mut(&r.session_id) else {
                return (FETCH_SESSION_ID_NOT_FOUND, 0);
            };
            if *epoch != r.session_epoch {
                return (INVALID_FETCH_SESSION_EPOCH, 0);
            }
            *epoch = next_epoch(*epoch);
            parts.extend(named);
            for k in &r.forget {
                parts.remove(k);
            }
            (0, r.session_id)
        }
    }

    #[derive(Debug, Clone)]
    enum Event {
        Answer,
        AnswerLost { applied: bool },
        Evicted,
        EpochSkew,
        CacheFull,
        ReplacedState,
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            8 => Just(Event::Answer),
            1 => any::<bool>().prop_map(|applied| Event::AnswerLost { applied }),
            1 => Just(Event::Evicted),
            1 => Just(Event::EpochSkew),
            1 => Just(Event::CacheFull),
            1 => Just(Event::ReplacedState),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// Random wanted sets, offset moves, answers and faults: after every answer that keeps
        /// the session, the broker reads exactly what the client thinks; after any error or loss
        /// the next fetch is full and names everything wanted.
        #[test]
        fn the_session_view_is_always_what_the_broker_holds(
            rounds in proptest::collection::vec(
                (proptest::collection::btree_set(0i32..12, 0..12), proptest::collection::vec(any::<bool>(), 12), event()),
                1..120,
            ),
        ) {
            let t0 = Instant::now();
            let mut s = FetchSession::default();
            let mut broker = Broker::default();
            let mut offsets = [0i64; 12];
            let mut must_be_full = true;
            for (i, (set, moves, ev)) in rounds.into_iter().enumerate() {
                let now = t0 + Duration::from_secs(i as u64 * 7);
                for (p, moved) in moves.iter().enumerate() {
                    if *moved {
                        offsets[p] += 1;
                    }
                }
                let set: BTreeSet<i32> = set;
                let w: Vec<(PartitionKey, PartitionAsk)> =
                    set.iter().map(|p| (key(*p), ask(offsets[*p as usize]))).collect();
                let asks: HashMap<PartitionKey, PartitionAsk> = w.iter().cloned().collect();
                let r = s.build(&w, now);
                if must_be_full {
                    prop_assert!(r.full, "round {i}: {r:?}");
                }
                if r.full {
                    prop_assert_eq!(names(&r.send), set.iter().copied().collect::<Vec<_>>());
                    prop_assert!(r.forget.is_empty());
                }
                // The session's view is exactly what is wanted, as wanted now.
                prop_assert_eq!(&s.view(), &asks);
                let (code, id) = match ev {
                    Event::Answer | Event::ReplacedState => broker.fetch(&r, &asks, false),
                    Event::CacheFull => broker.fetch(&r, &asks, true),
                    Event::Evicted => {
                        broker.sessions.clear();
                        broker.fetch(&r, &asks, false)
                    }
                    Event::EpochSkew => {
                        for v in broker.sessions.values_mut() {
                            v.0 = next_epoch(v.0);
                        }
                        broker.fetch(&r, &asks, false)
                    }
                    Event::AnswerLost { applied } => {
                        if applied {
                            broker.fetch(&r, &asks, false);
                        }
                        s.handle_failure();
                        must_be_full = true;
                        continue;
                    }
                };
                if matches!(ev, Event::ReplacedState) {
                    s.reset();
                }
                let answer = s.handle_response(code, id, 0, 0, now);
                prop_assert!(answer != Answer::Foreign);
                must_be_full = answer == Answer::Reset || matches!(ev, Event::ReplacedState);
                if code != 0 {
                    prop_assert_eq!(answer, Answer::Reset);
                }
                if answer == Answer::Continue {
                    let held = &broker.sessions[&id].1;
                    prop_assert_eq!(held, &s.view());
                }
                prop_assert_eq!(s.next_is_full(now), answer != Answer::Continue);
            }
        }
    }
}
