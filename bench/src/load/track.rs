//! Which stamped records reached the target: per source partition, a bit per sequence number
//! sent, so that a record seen twice is a duplicate and one never seen is lost, and the highest
//! sequence seen, so that a first sighting below it is out of order. Pure: no clock, no IO.
#![forbid(unsafe_code)]

use serde::Serialize;

/// Most records one run tracks, all partitions together (a bit each: 512 MiB at the limit).
pub const MAX_TRACKED_RECORDS: u64 = 1 << 32;

/// What a record read on the target was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The first copy of a record this run sent.
    First,
    /// A record seen before.
    Duplicate,
    /// Stamped with this run's id but a partition or sequence this run never sent (a corrupt
    /// or forged record).
    Unexpected,
}

#[derive(Debug, Clone, Default)]
struct PartitionTrack {
    sent: u64,
    bits: Vec<u64>,
    distinct: u64,
    duplicates: u64,
    out_of_order: u64,
    /// Copies read from another partition of the remote topic than their source partition.
    misplaced: u64,
    highest: Option<u64>,
}

/// Counts of one partition, or of all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub sent: u64,
    /// Distinct records seen.
    pub received: u64,
    /// Sent, never seen.
    pub lost: u64,
    /// Copies beyond the first.
    pub duplicated: u64,
    /// First copies read after a copy of a later record of the same partition.
    pub out_of_order: u64,
    /// Copies found on another partition of the remote topic than the one written.
    pub misplaced: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.sent += o.sent;
        self.received += o.received;
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.out_of_order += o.out_of_order;
        self.misplaced += o.misplaced;
    }
}

/// The tracker of one run.
#[derive(Debug, Clone)]
pub struct Tracker {
    parts: Vec<PartitionTrack>,
    unexpected: u64,
    sent_total: u64,
}

impl Tracker {
    pub fn new(partitions: usize) -> Tracker {
        Tracker {
            parts: vec![PartitionTrack::default(); partitions],
            unexpected: 0,
            sent_total: 0,
        }
    }

    /// Room for `n` more records on `partition`: false (nothing noted) when the run would track
    /// more than [`MAX_TRACKED_RECORDS`].
    pub fn may_send(&self, n: u64) -> bool {
        self.sent_total.saturating_add(n) <= MAX_TRACKED_RECORDS
    }

    /// The next `n` sequence numbers of `partition` are being sent (noted before the send, as
    /// the copy may be read before the source's acknowledgement is). Returns the first.
    pub fn sent(&mut self, partition: usize, n: u64) -> u64 {
        let Some(p) = self.parts.get_mut(partition) else {
            return 0;
        };
        let first = p.sent;
        p.sent += n;
        self.sent_total += n;
        p.bits.resize(p.sent.div_ceil(64) as usize, 0);
        first
    }

    /// Notes a record stamped with `stamped_partition` and `seq`, read from partition
    /// `read_from` of the remote topic.
    pub fn arrived(&mut self, stamped_partition: u32, seq: u64, read_from: i32) -> Arrival {
        let Some(p) = self.parts.get_mut(stamped_partition as usize) else {
            self.unexpected += 1;
            return Arrival::Unexpected;
        };
        if seq >= p.sent {
            self.unexpected += 1;
            return Arrival::Unexpected;
        }
        let (word, mask) = ((seq / 64) as usize, 1u64 << (seq % 64));
        if p.bits[word] & mask != 0 {
            p.duplicates += 1;
            return Arrival::Duplicate;
        }
        p.bits[word] |= mask;
        p.distinct += 1;
        if i64::from(stamped_partition) != i64::from(read_from) {
            p.misplaced += 1;
        }
        match p.highest {
            Some(h) if seq < h => p.out_of_order += 1,
            _ => p.highest = Some(seq),
        }
        Arrival::First
    }

    /// Every record sent so far was seen.
    pub fn complete(&self) -> bool {
        self.parts.iter().all(|p| p.distinct == p.sent)
    }

    /// Records of this run with a partition or sequence it never sent.
    pub fn unexpected(&self) -> u64 {
        self.unexpected
    }

    /// Per partition, in partition order.
    pub fn per_partition(&self) -> Vec<Counts> {
        self.parts
            .iter()
            .map(|p| Counts {
                sent: p.sent,
                received: p.distinct,
                lost: p.sent - p.distinct,
                duplicated: p.duplicates,
                out_of_order: p.out_of_order,
                misplaced: p.misplaced,
            })
            .collect()
    }

    /// All partitions together.
    pub fn totals(&self) -> Counts {
        self.per_partition()
            .iter()
            .fold(Counts::default(), |mut acc, c| {
                acc.add(c);
                acc
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lost_duplicated_and_out_of_order_are_counted_per_partition() {
        let mut t = Tracker::new(2);
        assert_eq!(t.sent(0, 5), 0);
        assert_eq!(t.sent(1, 3), 0);
        assert_eq!(t.sent(1, 2), 3);
        for seq in [0, 1, 3, 2, 1] {
            t.arrived(0, seq, 0);
        }
        assert_eq!(t.arrived(1, 4, 0), Arrival::First);
        assert_eq!(t.arrived(1, 4, 1), Arrival::Duplicate);
        assert_eq!(t.arrived(1, 5, 1), Arrival::Unexpected);
        assert_eq!(t.arrived(7, 0, 1), Arrival::Unexpected);
        let p = t.per_partition();
        assert_eq!(
            p[0],
            Counts {
                sent: 5,
                received: 4,
                lost: 1,
                duplicated: 1,
                out_of_order: 1,
                misplaced: 0
            }
        );
        assert_eq!(
            p[1],
            Counts {
                sent: 5,
                received: 1,
                lost: 4,
                duplicated: 1,
                out_of_order: 0,
                misplaced: 1
            }
        );
        assert_eq!(t.totals().lost, 5);
        assert_eq!(t.unexpected(), 2);
        assert!(!t.complete());
    }

    #[test]
    fn complete_once_every_record_sent_is_seen() {
        let mut t = Tracker::new(1);
        assert!(t.complete());
        t.sent(0, 2);
        t.arrived(0, 1, 0);
        assert!(!t.complete());
        t.arrived(0, 0, 0);
        assert!(t.complete());
        assert_eq!(t.totals().out_of_order, 1);
    }

    proptest! {
        /// Whatever order and repetition copies arrive in: received + lost = sent, duplicates
        /// are the copies beyond the first, and nothing panics on any stamp.
        #[test]
        fn accounting_adds_up(
            sent in 0u64..300,
            arrivals in proptest::collection::vec((0u32..3, 0u64..400), 0..600),
        ) {
            let mut t = Tracker::new(2);
            t.sent(0, sent);
            t.sent(1, sent / 2);
            let mut firsts = std::collections::HashSet::new();
            let mut dups = 0u64;
            let mut unexpected = 0u64;
            for (p, seq) in arrivals {
                let limit = if p == 0 { sent } else { sent / 2 };
                let got = t.arrived(p, seq, p as i32);
                if p > 1 || seq >= limit {
                    prop_assert_eq!(got, Arrival::Unexpected);
                    unexpected += 1;
                } else if firsts.insert((p, seq)) {
                    prop_assert_eq!(got, Arrival::First);
                } else {
                    prop_assert_eq!(got, Arrival::Duplicate);
                    dups += 1;
                }
            }
            let c = t.totals();
            prop_assert_eq!(c.sent, sent + sent / 2);
            prop_assert_eq!(c.received + c.lost, c.sent);
            prop_assert_eq!(c.received, firsts.len() as u64);
            prop_assert_eq!(c.duplicated, dups);
            prop_assert_eq!(t.unexpected(), unexpected);
        }
    }
}
