//! `read_committed` filtering of one partition's fetched batches, as the Java consumer does it
//! (`CompletedFetch.nextFetchedRecord`).
//!
//! The broker returns aborted data and control batches unfiltered, plus the list of aborted
//! transactions `(producerId, firstOffset)` overlapping the response. Walking the batches in log
//! order, every aborted transaction whose first offset is at or before the current batch's last
//! offset marks its producer as aborting; an ABORT marker from that producer ends the range; a
//! *transactional* batch from an aborting producer is dropped. Control batches are never
//! forwarded.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use super::error::BatchError;
use super::walk::{ControlType, RawBatch};

/// What to do with one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Replicate it (fast or slow path decides how).
    Forward,
    /// A control batch (transaction marker): never replicated.
    DropControl,
    /// A batch of an aborted transaction.
    DropAborted,
}

/// The filter state for one partition of one Fetch response. Build a new one per response from
/// that response's aborted-transactions list; the broker repeats a transaction in every response
/// that overlaps it, so a transaction spanning responses is handled.
///
/// Memory is bounded by the response's list, which is already in memory.
#[derive(Debug, Default)]
pub struct AbortedFilter {
    /// Aborted transactions not yet reached, by first offset.
    pending: BinaryHeap<Reverse<(i64, i64)>>,
    /// Producers whose aborted transaction is in progress at the current position.
    aborting: HashSet<i64>,
}

impl AbortedFilter {
    /// A filter over the response's `(producer_id, first_offset)` aborted transactions, in any
    /// order.
    pub fn new(aborted: impl IntoIterator<Item = (i64, i64)>) -> Self {
        let pending = aborted
            .into_iter()
            .map(|(producer_id, first_offset)| Reverse((first_offset, producer_id)))
            .collect();
        Self {
            pending,
            aborting: HashSet::new(),
        }
    }

    /// Classifies the next batch; call in log order. Fails only on a control batch whose marker
    /// cannot be read (the Java consumer fails there too).
    pub fn classify(&mut self, batch: &RawBatch) -> Result<Verdict, BatchError> {
        let producer_id = batch.producer_id();
        if producer_id >= 0 {
            let last_offset = batch.last_offset();
            while let Some(&Reverse((first_offset, aborted_producer))) = self.pending.peek() {
                if first_offset > last_offset {
                    break;
                }
                self.pending.pop();
                self.aborting.insert(aborted_producer);
            }
            if batch.is_control() {
                if batch.control_type()? == Some(ControlType::Abort) {
                    self.aborting.remove(&producer_id);
                }
                return Ok(Verdict::DropControl);
            }
            if batch.is_transactional() && self.aborting.contains(&producer_id) {
                return Ok(Verdict::DropAborted);
            }
        }
        Ok(if batch.is_control() {
            Verdict::DropControl
        } else {
            Verdict::Forward
        })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::batch::compression::Compression;
    use crate::batch::records::{BatchBuilder, Record, end_txn_marker};

    const P1: i64 = 1000;
    const P2: i64 = 2000;
    const P3: i64 = 3000;

    fn data(offset: i64, producer_id: i64, transactional: bool, records: usize) -> RawBatch {
        let mut b = BatchBuilder::new(Compression::Snappy)
            .base_offset(offset)
            .producer(producer_id, 0, offset as i32)
            .transactional(transactional);
        for i in 0..records {
            b.push(&Record::new(i as i64, None, Some(Bytes::from_static(b"v"))))
                .unwrap();
        }
        RawBatch::new(b.build().unwrap()).unwrap()
    }

    fn marker(kind: ControlType, offset: i64, producer_id: i64) -> RawBatch {
        RawBatch::new(end_txn_marker(kind, offset, producer_id, 0, 1)).unwrap()
    }

    fn run(filter: &mut AbortedFilter, batches: &[RawBatch]) -> Vec<Verdict> {
        batches
            .iter()
            .map(|b| filter.classify(b).unwrap())
            .collect()
    }

    use Verdict::{DropAborted, DropControl, Forward};

    #[test]
    fn interleaved_transactions_of_several_producers() {
        let log = [
            data(0, P1, true, 1),  // P1 txn A (aborted)
            data(1, P2, true, 2),  // P2 txn (committed)
            data(3, P1, true, 1),  // P1 txn A
            data(4, P3, false, 1), // plain idempotent producer
            data(5, -1, false, 1), // plain producer
            marker(ControlType::Commit, 6, P2),
            marker(ControlType::Abort, 7, P1),
            data(8, P1, true, 1), // P1 txn B (committed)
            data(9, P2, true, 1), // P2 txn (aborted)
            marker(ControlType::Commit, 10, P1),
            marker(ControlType::Abort, 11, P2),
        ];
        // Deliberately not sorted by offset.
        let mut filter = AbortedFilter::new([(P2, 9), (P1, 0)]);
        assert_eq!(
            run(&mut filter, &log),
            [
                DropAborted,
                Forward,
                DropAborted,
                Forward,
                Forward,
                DropControl,
                DropControl,
                Forward,
                DropAborted,
                DropControl,
                DropControl,
            ]
        );
    }

    #[test]
    fn aborted_transaction_spanning_fetch_responses() {
        // Response 1 ends inside P1's aborted transaction.
        let first = [data(0, P2, false, 1), data(1, P1, true, 3)];
        let mut filter = AbortedFilter::new([(P1, 1)]);
        assert_eq!(run(&mut filter, &first), [Forward, DropAborted]);
        // Response 2 starts inside it; the broker repeats the aborted transaction.
        let second = [
            data(4, P1, true, 2),
            marker(ControlType::Abort, 6, P1),
            data(7, P1, true, 1),
            marker(ControlType::Commit, 8, P1),
        ];
        let mut filter = AbortedFilter::new([(P1, 1)]);
        assert_eq!(
            run(&mut filter, &second),
            [DropAborted, DropControl, Forward, DropControl]
        );
    }

    #[test]
    fn abort_marker_ends_the_abort_range() {
        // The aborted transaction starts inside a batch (first offset 2 within 0..=3).
        let log = [
            data(0, P1, true, 4),
            marker(ControlType::Abort, 4, P1),
            data(5, P1, true, 1),
        ];
        let mut filter = AbortedFilter::new([(P1, 2)]);
        assert_eq!(run(&mut filter, &log), [DropAborted, DropControl, Forward]);
    }

    #[test]
    fn non_transactional_batches_of_an_aborting_producer_are_kept() {
        let log = [
            data(0, P1, true, 1),
            data(1, P1, false, 1), // idempotent, not part of the transaction
            marker(ControlType::Abort, 2, P1),
            data(3, P1, false, 1),
        ];
        let mut filter = AbortedFilter::new([(P1, 0)]);
        assert_eq!(
            run(&mut filter, &log),
            [DropAborted, Forward, DropControl, Forward]
        );
    }

    #[test]
    fn commit_marker_does_not_end_an_abort_range() {
        // Java only removes the producer on an ABORT marker.
        let log = [
            data(0, P1, true, 1),
            marker(ControlType::Commit, 1, P1),
            data(2, P1, true, 1),
        ];
        let mut filter = AbortedFilter::new([(P1, 0)]);
        assert_eq!(
            run(&mut filter, &log),
            [DropAborted, DropControl, DropAborted]
        );
    }

    #[test]
    fn without_aborted_transactions_only_control_batches_drop() {
        let log = [
            data(0, P1, true, 2),
            marker(ControlType::Commit, 2, P1),
            data(3, -1, false, 1),
        ];
        let mut filter = AbortedFilter::new([]);
        assert_eq!(run(&mut filter, &log), [Forward, DropControl, Forward]);
    }

    #[test]
    fn unreadable_marker_is_an_error() {
        let mut bytes = end_txn_marker(ControlType::Abort, 0, P1, 0, 1).to_vec();
        // Key length varint of the first record -> 2: a key too short for version and type.
        bytes[61 + 4] = 0x04;
        let batch = RawBatch::new(Bytes::from(bytes)).unwrap();
        let mut filter = AbortedFilter::new([(P1, 0)]);
        assert!(filter.classify(&batch).is_err());
    }
}
