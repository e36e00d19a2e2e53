//! What the handlers share: the snapshot the control loop publishes, the command queue, the
//! access rule.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::mpsc;

use super::auth::Auth;
use super::command::ApiCommand;
use super::status::Status;

/// The snapshot shared between the control loop and the API.
#[derive(Debug, Clone, Default)]
pub struct Published {
    inner: Arc<Mutex<(Status, Option<Instant>)>>,
    /// Someone read the snapshot since the last publish: the control loop refreshes it at its
    /// fast interval only then (building it names every partition; at ten thousand partitions
    /// that was half of an idle run's control thread).
    wanted: Arc<AtomicBool>,
}

impl Published {
    pub fn publish(&self, status: Status, now: Instant) {
        if let Ok(mut g) = self.inner.lock() {
            *g = (status, Some(now));
        }
        self.wanted.store(false, Ordering::Relaxed);
    }

    /// The snapshot and when it was published; marks it wanted.
    pub fn snapshot(&self) -> (Status, Option<Instant>) {
        self.wanted.store(true, Ordering::Relaxed);
        self.inner
            .lock()
            .map(|g| g.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Whether the snapshot was read since it was published.
    pub fn is_wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(super) struct AppState {
    pub(super) published: Published,
    pub(super) commands: mpsc::Sender<ApiCommand>,
    pub(super) auth: Arc<Auth>,
}
