//! What the handlers share: the snapshot the control loop publishes, the command queue, the
//! access rule.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc};

use super::auth::Auth;
use super::command::ApiCommand;
use super::status::Status;

/// The snapshot shared between the control loop and the API. The control loop builds one
/// when a reader asks for it (`fresh`) and otherwise only every few seconds: building it names
/// every partition, which was most of an idle control thread's CPU at 10 000 partitions.
#[derive(Debug, Clone, Default)]
pub struct Published {
    inner: Arc<Mutex<(Status, Option<Instant>)>>,
    /// A reader waits for a snapshot newer than [`FRESH_ENOUGH`].
    wanted: Arc<AtomicBool>,
    published: Arc<Notify>,
}

/// A snapshot this young is served as it is; an older one is built again for the reader.
pub const FRESH_ENOUGH: Duration = Duration::from_millis(200);

/// How long a reader of the status, the metrics or the flows waits for a fresh snapshot: past
/// a duty's 2 s deadline, so that a busy loop still answers it.
pub const READ_WAIT: Duration = Duration::from_millis(2500);

/// How long a health probe waits for one: probes time out early (Kubernetes: 1 s), and an old
/// snapshot is what liveness is about.
pub(super) const PROBE_WAIT: Duration = Duration::from_millis(500);

impl Published {
    pub fn publish(&self, status: Status, now: Instant) {
        if let Ok(mut g) = self.inner.lock() {
            *g = (status, Some(now));
        }
        self.published.notify_waiters();
    }

    /// The last snapshot, however old.
    pub fn snapshot(&self) -> (Status, Option<Instant>) {
        self.inner
            .lock()
            .map(|g| g.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// A snapshot at most [`FRESH_ENOUGH`] old: asks the control loop for a new one and waits
    /// for it at most `wait` (the loop publishes between duties, each within a 2 s deadline).
    /// Past `wait` the last one, whose age then tells that the loop is late.
    pub async fn fresh(&self, wait: Duration) -> (Status, Option<Instant>) {
        let notified = self.published.notified();
        tokio::pin!(notified);
        // Registered before asking, so that a publish right after the ask wakes this reader.
        notified.as_mut().enable();
        let current = self.snapshot();
        if current.1.is_some_and(|t| t.elapsed() <= FRESH_ENOUGH) {
            return current;
        }
        self.wanted.store(true, Ordering::Release);
        let _late = tokio::time::timeout(wait, notified).await;
        self.snapshot()
    }

    /// Whether a reader waits for a new snapshot (cleared by [`Published::take_wanted`]).
    pub fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Acquire)
    }

    /// Clears the request, before the control loop builds the snapshot it asked for.
    pub fn take_wanted(&self) -> bool {
        self.wanted.swap(false, Ordering::AcqRel)
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(super) struct AppState {
    pub(super) published: Published,
    pub(super) commands: mpsc::Sender<ApiCommand>,
    pub(super) auth: Arc<Auth>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    }

    fn status_named(name: &str) -> Status {
        Status {
            version: name.into(),
            ..Status::default()
        }
    }

    /// A snapshot named "old", published 3 s ago, and when.
    fn published_3_s_ago() -> (Published, Instant) {
        let p = Published::default();
        let old = Instant::now() - Duration::from_secs(3);
        p.publish(status_named("old"), old);
        (p, old)
    }

    #[test]
    fn a_young_snapshot_is_served_as_it_is() {
        runtime().block_on(async {
            let p = Published::default();
            p.publish(status_named("young"), Instant::now());
            let (s, _) = p.fresh(Duration::from_secs(5)).await;
            assert_eq!(s.version, "young");
            assert!(!p.wanted(), "nothing to ask for");
        });
    }

    #[test]
    fn an_old_snapshot_is_built_again_for_the_reader() {
        runtime().block_on(async {
            let (p, old) = published_3_s_ago();
            // The control loop's side: publishes once asked.
            let loop_side = p.clone();
            let publisher = async move {
                while !loop_side.wanted() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                assert!(loop_side.take_wanted());
                loop_side.publish(status_named("new"), Instant::now());
            };
            let ((s, at), ()) = tokio::join!(p.fresh(Duration::from_secs(5)), publisher);
            assert_eq!(s.version, "new");
            assert!(at.is_some_and(|t| t > old));
            assert!(!p.wanted());
        });
    }

    #[test]
    fn a_loop_that_does_not_answer_leaves_the_old_snapshot_after_the_wait() {
        runtime().block_on(async {
            let (p, old) = published_3_s_ago();
            let (s, at) = p.fresh(Duration::from_millis(20)).await;
            assert_eq!(s.version, "old");
            assert_eq!(at, Some(old));
            assert!(p.wanted(), "still asked for");
        });
    }
}
