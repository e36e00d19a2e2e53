//! Kafka transactions for exactly-once forwarding: a transactional producer's identity
//! (FindCoordinator with key type transaction, InitProducerId with a transactional id), the
//! partitions of its open transaction (AddPartitionsToTxn), its end (EndTxn), and what the
//! coordinator holds for the id (DescribeTransactions, KIP-664: Kafka 3.0 and later).
//!
//! strait adds every partition explicitly (AddPartitionsToTxn v3; v4+ is the brokers' batched
//! form), which every version since KIP-98 accepts. Where the coordinator offers KIP-890's
//! second part (EndTxn v5, advertised by Kafka 4.0+ brokers with `transaction.version` 2), each
//! EndTxn gives the producer a new epoch for its next transaction, so that a late write of one
//! transaction cannot land in the next; older coordinators (3.x, or 4.x at transaction version
//! one) keep one epoch from one transaction to the next. Tested on the 4.1.1 test bed, at
//! transaction version two, and through the binary into a 3.9.1 target (`control/tests/legacy.rs`).

use std::future::Future;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, DescribeTransactionsRequest, EndTxnRequest, InitProducerIdRequest,
    TopicName, TransactionalId,
};
use strait_dataplane::io::BrokerConn;

use super::{Cluster, ClusterError, Context, Result, sb};
use crate::model::TopicPartition;

/// The transaction timeout strait's exactly-once producers ask for unless the target's
/// producer sets `transaction.timeout.ms`: the coordinator aborts a transaction left open
/// longer (a holder that died without being replaced). Kafka's producer default; a commit
/// interval is far shorter.
pub const TRANSACTION_TIMEOUT_MS: i32 = 60_000;

/// FindCoordinator's key type of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// The wait between tries while the coordinator is still ending the previous transaction
/// (`ConcurrentTransactions`, usually a few milliseconds of marker writes). Kafka's producer
/// waits 20 ms too.
const CONCURRENT_TXN_BACKOFF: Duration = Duration::from_millis(20);

/// How long a call waits for the previous transaction to end before it reports
/// `ConcurrentTransactions`: a coordinator completes a commit in well under this unless a
/// partition leader is unavailable.
const CONCURRENT_TXN_WAIT: Duration = Duration::from_secs(30);

/// A transactional producer on a cluster: its transactional id and the producer id and epoch
/// InitProducerId gave it. A later InitProducerId with the same transactional id (by anyone)
/// bumps the epoch and fences this one: its produces and EndTxn then fail with
/// `ProducerFenced` or `InvalidProducerEpoch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnProducer {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// What the coordinator holds for a transactional id (DescribeTransactions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnState {
    /// The coordinator's name for it: `Empty`, `Ongoing`, `PrepareCommit`, `PrepareAbort`,
    /// `CompleteCommit`, `CompleteAbort`, `PrepareEpochFence`, `Dead`.
    pub state: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// How a transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnEnd {
    Commit,
    Abort,
}

impl Cluster {
    fn txn_ctx(&self, api: &'static str, transactional_id: &str) -> Context {
        self.ctx(api).transactional_id(transactional_id)
    }

    /// [`Cluster::retrying`], and while the coordinator answers `ConcurrentTransactions`, tried
    /// again every [`CONCURRENT_TXN_BACKOFF`] for at most [`CONCURRENT_TXN_WAIT`].
    async fn txn_retrying<T, F, Fut>(&self, api: &'static str, mut op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let deadline = Instant::now() + CONCURRENT_TXN_WAIT;
        loop {
            match self.retrying(api, &mut op).await {
                Err(e)
                    if e.is(ResponseError::ConcurrentTransactions) && Instant::now() < deadline =>
                {
                    tokio::time::sleep(CONCURRENT_TXN_BACKOFF).await;
                }
                r => return r,
            }
        }
    }

    /// The coordinator of a transactional id (cached until a routing error).
    pub async fn txn_coordinator(&self, transactional_id: &str) -> Result<i32> {
        if let Some(n) = self.txn_coordinators.borrow().get(transactional_id) {
            return Ok(*n);
        }
        let ctx = self.txn_ctx("FindCoordinator", transactional_id);
        let node = self
            .find_coordinator(KEY_TYPE_TRANSACTION, transactional_id, &ctx)
            .await?;
        self.txn_coordinators
            .borrow_mut()
            .insert(transactional_id.to_string(), node);
        Ok(node)
    }

    async fn txn_coordinator_conn(
        &self,
        transactional_id: &str,
        api: &'static str,
    ) -> Result<BrokerConn> {
        let node = self.txn_coordinator(transactional_id).await?;
        self.node_conn(node, api).await.inspect_err(|_| {
            self.txn_coordinators.borrow_mut().remove(transactional_id);
        })
    }

    /// Forgets a transaction coordinator after an error that says it moved.
    fn check_txn_coordinator(&self, transactional_id: &str, e: &ClusterError) {
        if e.is(ResponseError::NotCoordinator) || e.is(ResponseError::CoordinatorNotAvailable) {
            self.txn_coordinators.borrow_mut().remove(transactional_id);
        }
    }

    /// The coordinator's answer: `ok()` when `code` is no error, else the error (forgetting the
    /// coordinator when it says it moved).
    fn txn_answer<T>(
        &self,
        transactional_id: &str,
        ctx: Context,
        code: i16,
        ok: impl FnOnce() -> T,
    ) -> Result<T> {
        match ClusterError::kafka(ctx, code, None) {
            Some(e) => {
                self.check_txn_coordinator(transactional_id, &e);
                Err(e)
            }
            None => Ok(ok()),
        }
    }

    /// InitProducerId for `transactional_id`: the coordinator ends (aborts, or completes a
    /// commit already decided) any transaction an earlier holder left open, bumps the epoch,
    /// and from then on refuses the earlier holder's produces and EndTxn. Retried while the
    /// coordinator says a transaction is still ending (`ConcurrentTransactions`).
    /// `transaction_timeout_ms` is how long the coordinator lets a transaction stay open
    /// before it aborts it.
    pub async fn init_txn_producer(
        &self,
        transactional_id: &str,
        transaction_timeout_ms: i32,
    ) -> Result<TxnProducer> {
        let api = "InitProducerId";
        self.txn_retrying(api, || async {
            let conn = self.txn_coordinator_conn(transactional_id, api).await?;
            let ctx = self.txn_ctx(api, transactional_id).broker(conn.broker());
            let req = InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(sb(transactional_id))))
                .with_transaction_timeout_ms(transaction_timeout_ms)
                .with_producer_id((-1).into())
                .with_producer_epoch(-1);
            let resp = conn
                .call(&req)
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            self.txn_answer(transactional_id, ctx, resp.error_code, || TxnProducer {
                transactional_id: transactional_id.to_string(),
                producer_id: resp.producer_id.0,
                producer_epoch: resp.producer_epoch,
            })
        })
        .await
    }

    /// Adds `partitions` to the producer's transaction (opening one if none is open). A
    /// partition already in it is accepted again.
    pub async fn add_partitions_to_txn(
        &self,
        producer: &TxnProducer,
        partitions: &[TopicPartition],
    ) -> Result<()> {
        let api = "AddPartitionsToTxn";
        let txn = producer.transactional_id.as_str();
        let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
        for tp in partitions {
            match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
                Some(t) => t.partitions.push(tp.partition),
                None => topics.push(
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(sb(&tp.topic)))
                        .with_partitions(vec![tp.partition]),
                ),
            }
        }
        self.txn_retrying(api, || async {
            let conn = self.txn_coordinator_conn(txn, api).await?;
            let ctx = self.txn_ctx(api, txn).broker(conn.broker());
            let req = AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(sb(txn)))
                .with_v3_and_below_producer_id(producer.producer_id.into())
                .with_v3_and_below_producer_epoch(producer.producer_epoch)
                .with_v3_and_below_topics(topics.clone());
            let resp = conn
                .call(&req)
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            // Every partition answers; a partition's real error comes with "not attempted"
            // for the others: report the real one.
            let mut errors: Vec<ClusterError> = Vec::new();
            for t in &resp.results_by_topic_v3_and_below {
                for p in &t.results_by_partition {
                    let pctx = ctx
                        .clone()
                        .topic(t.name.0.as_str())
                        .partition(p.partition_index);
                    errors.extend(ClusterError::kafka(pctx, p.partition_error_code, None));
                }
            }
            let real = errors
                .iter()
                .position(|e| !e.is(ResponseError::OperationNotAttempted));
            let first = match real {
                Some(i) => Some(errors.swap_remove(i)),
                None => errors.into_iter().next(),
            };
            match first {
                Some(e) => {
                    self.check_txn_coordinator(txn, &e);
                    Err(e)
                }
                None => Ok(()),
            }
        })
        .await
    }

    /// What the coordinator holds for `transactional_id`: its state, producer id and epoch.
    pub async fn describe_txn(&self, transactional_id: &str) -> Result<TxnState> {
        let api = "DescribeTransactions";
        self.retrying(api, || async {
            let conn = self.txn_coordinator_conn(transactional_id, api).await?;
            let ctx = self.txn_ctx(api, transactional_id).broker(conn.broker());
            let req = DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![TransactionalId(sb(transactional_id))]);
            let resp = conn
                .call(&req)
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            let Some(t) = resp
                .transaction_states
                .into_iter()
                .find(|t| t.transactional_id.0.as_str() == transactional_id)
            else {
                return Err(ClusterError::Invalid {
                    context: Box::new(ctx),
                    message: "the answer lacks the transactional id asked for".into(),
                });
            };
            self.txn_answer(transactional_id, ctx, t.error_code, || TxnState {
                state: t.transaction_state.as_str().to_string(),
                producer_id: t.producer_id.0,
                producer_epoch: t.producer_epoch,
            })
        })
        .await
    }

    /// Ends the producer's open transaction: `Commit` makes what it wrote visible to
    /// read_committed readers, `Abort` discards it. Retried while the coordinator is busy.
    /// Where the coordinator speaks KIP-890's second part (EndTxn v5, transaction version 2)
    /// it gives the producer a new epoch (or a new producer id once epochs run out) for its
    /// next transaction: returned, to be used from then on.
    pub async fn end_txn(
        &self,
        producer: &TxnProducer,
        end: TxnEnd,
    ) -> Result<Option<TxnProducer>> {
        let api = "EndTxn";
        let txn = producer.transactional_id.as_str();
        self.txn_retrying(api, || async {
            let conn = self.txn_coordinator_conn(txn, api).await?;
            let ctx = self.txn_ctx(api, txn).broker(conn.broker());
            let req = EndTxnRequest::default()
                .with_transactional_id(TransactionalId(sb(txn)))
                .with_producer_id(producer.producer_id.into())
                .with_producer_epoch(producer.producer_epoch)
                .with_committed(end == TxnEnd::Commit);
            let resp = conn
                .call(&req)
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            self.txn_answer(txn, ctx, resp.error_code, || {
                // Below v5 the fields are absent and keep their default, -1.
                (resp.producer_epoch >= 0 && resp.producer_id.0 >= 0).then(|| TxnProducer {
                    transactional_id: producer.transactional_id.clone(),
                    producer_id: resp.producer_id.0,
                    producer_epoch: resp.producer_epoch,
                })
            })
        })
        .await
    }
}
