//! Backend selection (io_uring or epoll), single-threaded runtimes, and core pinning.

use std::future::Future;
use std::io;

/// The IO backend a thread runs on. Chosen once at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoBackend {
    /// tokio-uring: io_uring submission and completion queues.
    Uring,
    /// tokio `current_thread` on epoll.
    Epoll,
}

impl IoBackend {
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::Uring => "uring",
            IoBackend::Epoll => "epoll",
        }
    }
}

/// What the operator asked for (`--io`, `strait.io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoChoice {
    /// io_uring when the kernel allows it, else epoll.
    #[default]
    Auto,
    Uring,
    Epoll,
}

impl IoChoice {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(IoChoice::Auto),
            "uring" => Some(IoChoice::Uring),
            "epoll" => Some(IoChoice::Epoll),
            _ => None,
        }
    }
}

/// The result of probing io_uring.
#[derive(Debug)]
pub struct Selection {
    pub backend: IoBackend,
    /// Why io_uring is not used, when `auto` fell back to epoll.
    pub fallback_reason: Option<String>,
}

/// Why io_uring cannot be used, in operator terms (permissions, kernel, memlock, or disabled on
/// purpose). Not retriable: it is a property of the host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UringUnavailable(pub String);

/// `--io uring` was asked for and io_uring cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--io uring was requested but {0}")]
pub struct BackendError(pub UringUnavailable);

/// Picks the backend. `Uring` fails if io_uring cannot start; `Auto` falls back with a reason.
pub fn select_backend(choice: IoChoice) -> Result<Selection, BackendError> {
    match choice {
        IoChoice::Epoll => Ok(Selection {
            backend: IoBackend::Epoll,
            fallback_reason: None,
        }),
        IoChoice::Uring => match probe_uring() {
            Ok(()) => Ok(Selection {
                backend: IoBackend::Uring,
                fallback_reason: None,
            }),
            Err(why) => Err(BackendError(why)),
        },
        IoChoice::Auto => Ok(match probe_uring() {
            Ok(()) => Selection {
                backend: IoBackend::Uring,
                fallback_reason: None,
            },
            Err(why) => Selection {
                backend: IoBackend::Epoll,
                fallback_reason: Some(why.0),
            },
        }),
    }
}

/// Tries to create an io_uring instance and explains a failure in operator terms.
pub fn probe_uring() -> Result<(), UringUnavailable> {
    if std::env::var_os("STRAIT_DISABLE_IO_URING").is_some() {
        return Err(UringUnavailable(
            "io_uring is disabled by STRAIT_DISABLE_IO_URING".to_string(),
        ));
    }
    match tokio_uring::Runtime::new(&tokio_uring::builder()) {
        Ok(rt) => {
            drop(rt);
            Ok(())
        }
        Err(e) => Err(UringUnavailable(explain_uring_error(&e))),
    }
}

fn explain_uring_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => format!(
            "io_uring is not permitted ({e}): a seccomp profile (the Docker default) or kernel.io_uring_disabled blocks it"
        ),
        Some(libc::ENOSYS) => format!("this kernel has no io_uring ({e})"),
        Some(libc::ENOMEM) => {
            format!("io_uring could not lock memory ({e}): raise RLIMIT_MEMLOCK (ulimit -l)")
        }
        _ => format!("io_uring could not start ({e})"),
    }
}

/// Runs `fut` to completion on a new single-threaded runtime of the given backend, on the
/// current thread. Local tasks (`tokio::task::spawn_local`) work on both.
pub fn block_on<F: Future>(backend: IoBackend, fut: F) -> io::Result<F::Output> {
    match backend {
        IoBackend::Uring => {
            let rt = tokio_uring::Runtime::new(&tokio_uring::builder())?;
            Ok(rt.block_on(fut))
        }
        IoBackend::Epoll => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let local = tokio::task::LocalSet::new();
            Ok(local.block_on(&rt, fut))
        }
    }
}

/// The cores this process may run on, read before any thread is pinned (pinning narrows the
/// calling thread's mask, which is what `core_affinity` reads). Never empty.
pub fn allowed_cores() -> Vec<core_affinity::CoreId> {
    let mut cores = core_affinity::get_core_ids().unwrap_or_default();
    // A CFS quota (containers) can allow fewer CPUs than the cpuset lists.
    if let Ok(n) = std::thread::available_parallelism() {
        cores.truncate(n.get().max(1));
    }
    if cores.is_empty() {
        cores.push(core_affinity::CoreId { id: 0 });
    }
    cores
}

/// The CPUs the calling thread may run on (its inherited `sched_getaffinity` mask: taskset, a
/// cgroup cpuset), without the CFS quota's truncation of [`allowed_cores`]. Call it before
/// pinning the thread.
pub fn affinity_mask() -> Vec<usize> {
    core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect()
}

pub use core_affinity::CoreId;

/// Pins the current thread to `core`. Returns false if the OS refused (then the thread simply
/// floats, which is correct, only slower).
pub fn pin_current_thread(core: core_affinity::CoreId) -> bool {
    core_affinity::set_for_current(core)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse() {
        assert_eq!(IoChoice::parse("auto"), Some(IoChoice::Auto));
        assert_eq!(IoChoice::parse("epoll"), Some(IoChoice::Epoll));
        assert_eq!(IoChoice::parse("kqueue"), None);
    }

    #[test]
    fn epoll_is_always_available() {
        let s = select_backend(IoChoice::Epoll).unwrap();
        assert_eq!(s.backend, IoBackend::Epoll);
        assert_eq!(block_on(s.backend, async { 7 }).unwrap(), 7);
    }

    #[test]
    fn auto_yields_a_working_backend() {
        let s = select_backend(IoChoice::Auto).unwrap();
        if s.backend == IoBackend::Epoll {
            assert!(s.fallback_reason.is_some());
        }
        let out = block_on(s.backend, async {
            tokio::task::spawn_local(async { 5 }).await.unwrap()
        })
        .unwrap();
        assert_eq!(out, 5);
    }

    #[test]
    fn allowed_cores_is_never_empty() {
        assert!(!allowed_cores().is_empty());
    }
}
