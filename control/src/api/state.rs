//! What the handlers share: the snapshot the control loop publishes, the command queue, the
//! access rule.

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
}

impl Published {
    pub fn publish(&self, status: Status, now: Instant) {
        if let Ok(mut g) = self.inner.lock() {
            *g = (status, Some(now));
        }
    }

    pub fn snapshot(&self) -> (Status, Option<Instant>) {
        self.inner
            .lock()
            .map(|g| g.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(super) struct AppState {
    pub(super) published: Published,
    pub(super) commands: mpsc::Sender<ApiCommand>,
    pub(super) auth: Arc<Auth>,
}
