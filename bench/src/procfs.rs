//! CPU time and memory of processes, from Linux `/proc`.
//!
//! A replicator's CPU is summed over its process tree: for every live process in the tree,
//! `utime + stime + cutime + cstime`. A child that exits and is reaped by its parent moves its
//! time into the parent's `cutime/cstime`, so the sum stays exact and never drops. Peak memory
//! is the sum of the tree's `VmHWM` (the kernel's own peak RSS per process).
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::fs;

/// The fields of `/proc/<pid>/stat` the harness uses, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub ppid: u32,
    pub utime: u64,
    pub stime: u64,
    pub cutime: u64,
    pub cstime: u64,
}

impl ProcStat {
    /// Own and reaped children's CPU, in ticks.
    pub fn total_ticks(&self) -> u64 {
        self.utime + self.stime + self.cutime + self.cstime
    }
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) may contain spaces and parentheses,
/// so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); field n is f[n - 3].
    let num =
        |n: usize| -> Option<u64> { f.get(n - 3)?.parse::<i64>().ok().map(|v| v.max(0) as u64) };
    Some(ProcStat {
        ppid: u32::try_from(num(4)?).ok()?,
        utime: num(14)?,
        stime: num(15)?,
        cutime: num(16)?,
        cstime: num(17)?,
    })
}

/// Reads a `kB` field (`VmHWM`, `VmRSS`) of `/proc/<pid>/status`, in KiB.
pub fn parse_status_kib(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Busy and total ticks of all CPUs, from the first line of `/proc/stat`. Busy excludes idle
/// and iowait.
pub fn parse_machine_ticks(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// All pids in the tree rooted at `root`, given every process's parent.
pub fn tree_of(root: u32, parents: &HashMap<u32, u32>) -> Vec<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (&pid, &ppid) in parents {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    // A pid table is finite and a child's pid never equals an ancestor's at one instant, but
    // /proc is read non-atomically: bound the walk by the table size anyway.
    while let Some(p) = stack.pop() {
        if out.len() > parents.len() {
            break;
        }
        out.push(p);
        if let Some(c) = children.get(&p) {
            stack.extend(c.iter().copied().filter(|&c| c != root));
        }
    }
    out
}

/// Clock ticks per second (`getconf CLK_TCK`); 100 on every mainstream Linux.
pub fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

fn read_stat(pid: u32) -> Option<ProcStat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn read_status_kib(pid: u32, field: &str) -> Option<u64> {
    parse_status_kib(
        &fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
        field,
    )
}

/// Every live process's parent.
fn parents() -> HashMap<u32, u32> {
    let mut out = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(st) = read_stat(pid) {
                out.insert(pid, st.ppid);
            }
        }
    }
    out
}

/// `/proc/stat` busy and total ticks.
pub fn machine_ticks() -> Option<(u64, u64)> {
    parse_machine_ticks(&fs::read_to_string("/proc/stat").ok()?)
}

/// CPU seconds (own + reaped children) of one process, no tree walk; `None` once it is gone.
pub fn process_cpu_s(pid: u32, ticks_per_s: u64) -> Option<f64> {
    read_stat(pid).map(|s| s.total_ticks() as f64 / ticks_per_s as f64)
}

/// One sample of a process tree.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TreeSample {
    /// CPU seconds used since the tree's root started.
    pub cpu_s: f64,
    /// Sum of current RSS, MiB.
    pub rss_mib: f64,
    /// Sum of peak RSS (`VmHWM`), MiB.
    pub hwm_mib: f64,
    /// Processes in the tree (0 once the root is gone).
    pub processes: usize,
}

/// Samples a process tree, keeping the largest values seen so that a last sample taken after
/// the root has exited does not lose what it used.
#[derive(Debug)]
pub struct TreeSampler {
    root: u32,
    ticks_per_s: u64,
    max_cpu_s: f64,
    max_hwm_mib: f64,
}

impl TreeSampler {
    pub fn new(root: u32) -> Self {
        TreeSampler {
            root,
            ticks_per_s: clock_ticks_per_second(),
            max_cpu_s: 0.0,
            max_hwm_mib: 0.0,
        }
    }

    pub fn sample(&mut self) -> TreeSample {
        let parents = parents();
        let pids = if parents.contains_key(&self.root) {
            tree_of(self.root, &parents)
        } else {
            Vec::new()
        };
        let mut ticks = 0;
        let (mut rss, mut hwm) = (0u64, 0u64);
        let mut processes = 0;
        for &p in &pids {
            if let Some(st) = read_stat(p) {
                ticks += st.total_ticks();
                processes += 1;
                rss += read_status_kib(p, "VmRSS").unwrap_or(0);
                hwm += read_status_kib(p, "VmHWM").unwrap_or(0);
            }
        }
        let cpu_s = ticks as f64 / self.ticks_per_s as f64;
        self.max_cpu_s = self.max_cpu_s.max(cpu_s);
        self.max_hwm_mib = self.max_hwm_mib.max(hwm as f64 / 1024.0);
        TreeSample {
            cpu_s: self.max_cpu_s,
            rss_mib: rss as f64 / 1024.0,
            hwm_mib: self.max_hwm_mib,
            processes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let line = "4242 (java (x) y) S 17 4242 4242 0 -1 4194560 123 0 0 0 1500 250 30 7 20 0 50 0 1000 3000000 5000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            s,
            ProcStat {
                ppid: 17,
                utime: 1500,
                stime: 250,
                cutime: 30,
                cstime: 7
            }
        );
        assert_eq!(s.total_ticks(), 1787);
        assert_eq!(parse_stat("12 (x) S 1 2"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn parses_status_fields() {
        let text = "Name:\tjava\nVmPeak:\t 5000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
        assert_eq!(parse_status_kib(text, "VmHWM"), Some(204_800));
        assert_eq!(parse_status_kib(text, "VmRSS"), Some(102_400));
        assert_eq!(parse_status_kib(text, "VmSwap"), None);
    }

    #[test]
    fn parses_machine_ticks() {
        let text = "cpu  100 5 50 1000 20 1 2 3 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(parse_machine_ticks(text), Some((161, 1181)));
        assert_eq!(parse_machine_ticks("intr 1 2"), None);
    }

    #[test]
    fn walks_a_process_tree() {
        let parents: HashMap<u32, u32> =
            [(10, 1), (11, 10), (12, 10), (13, 11), (20, 1), (21, 20)].into();
        let mut t = tree_of(10, &parents);
        t.sort();
        assert_eq!(t, vec![10, 11, 12, 13]);
        assert_eq!(tree_of(13, &parents), vec![13]);
    }

    #[test]
    fn samples_this_process() {
        let pid = std::process::id();
        // Burn a little CPU so the count is above zero.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert_ne!(x, 1);
        let mut s = TreeSampler::new(pid);
        let a = s.sample();
        assert!(a.processes >= 1);
        assert!(a.hwm_mib > 0.0 && a.rss_mib > 0.0);
        assert!(a.cpu_s > 0.0);
        let b = s.sample();
        assert!(b.cpu_s >= a.cpu_s);
        let mut gone = TreeSampler::new(u32::MAX - 1);
        assert_eq!(gone.sample().processes, 0);
        assert!(machine_ticks().is_some());
    }
}
