//! What a result was measured on: machine, commit, test bed processes.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

/// The machine, as recorded with every result.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub cpu_model: String,
    pub mem_total_mib: u64,
    pub kernel: String,
    /// `/proc/loadavg` when the run started: other work on the machine shows here.
    pub loadavg_at_start: String,
}

impl Machine {
    pub fn describe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Machine {
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
            mem_total_mib: crate::procfs::parse_status_kib(&meminfo, "MemTotal").unwrap_or(0)
                / 1024,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            loadavg_at_start: std::fs::read_to_string("/proc/loadavg")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
        }
    }
}

fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    })
}

/// `git rev-parse HEAD` of `repo`, with `-dirty` when the work tree has changes.
pub fn commit(repo: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(head) = git(&["rev-parse", "HEAD"]) else {
        return "unknown".into();
    };
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty { format!("{head}-dirty") } else { head }
}

/// The test bed's state directory: `$STRAIT_TESTBED_DIR`, else `<repo>/.testbed`.
pub fn testbed_dir(repo: &Path) -> PathBuf {
    std::env::var_os("STRAIT_TESTBED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join(".testbed"))
}

/// A variable from `<testbed>/testbed.env` (`export NAME=value` lines).
pub fn testbed_var(dir: &Path, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("testbed.env")).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.trim().strip_prefix("export ")?.split_once('=')?;
        (k == name).then(|| v.trim_matches('\'').trim_matches('"').to_string())
    })
}

/// The pids of a test-bed cluster's running nodes: `<cluster>/kafka.pid` of the single-node
/// clusters (`source`, `target`), else every `<cluster>/node-N/kafka.pid` of a fault cluster
/// (`fsource`, `ftarget`; dedicated controllers included). Empty when none runs.
pub fn broker_pids(dir: &Path, cluster: &str) -> Vec<u32> {
    let running = |pid_file: &Path| -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(pid_file)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
    };
    let root = dir.join(cluster);
    if let Some(pid) = running(&root.join("kafka.pid")) {
        return vec![pid];
    }
    let mut nodes: Vec<PathBuf> = std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("node-"))
        })
        .collect();
    nodes.sort();
    nodes
        .iter()
        .filter_map(|n| running(&n.join("kafka.pid")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_model() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: x\n";
        assert_eq!(cpu_model(text).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0"), None);
    }

    #[test]
    fn describes_this_machine() {
        let m = Machine::describe();
        assert!(m.nproc >= 1);
        assert!(m.mem_total_mib > 0);
        assert_ne!(m.kernel, "unknown");
    }
}
