//! `strait.cpus` (issue 28): the shard threads run on the listed CPUs and the control thread on
//! another CPU of the process's affinity mask, read back from `/proc/<pid>/task/*/status`; a
//! CPU outside the mask is refused with the key named.
#![forbid(unsafe_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use strait_tests::strait::Strait;
use strait_tests::{Testbed, testbed_mm2_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// `Cpus_allowed_list` of a `/proc/.../status` file, expanded.
fn allowed(status: &str) -> Vec<usize> {
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .trim();
    list.split(',')
        .flat_map(|part| {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()
        })
        .collect()
}

/// Each thread of `pid`: its name and allowed CPUs.
fn threads(pid: u32) -> Vec<(u32, String, Vec<usize>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).expect("task dir") {
        let path = entry.expect("entry").path();
        let tid: u32 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
        let (Ok(comm), Ok(status)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("status")),
        ) else {
            continue; // the thread ended meanwhile
        };
        out.push((tid, comm.trim().to_string(), allowed(&status)));
    }
    out
}

#[test]
fn strait_cpus_places_the_shards_and_keeps_the_control_thread_off_them() {
    Testbed::get();
    let mask = allowed(&std::fs::read_to_string("/proc/self/status").unwrap());
    let shard_cpu = *mask.last().expect("a CPU");
    let cfg = testbed_mm2_config(
        &unique("cpus-none"),
        &format!("strait.cpus = {shard_cpu}\n"),
    );
    let run = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !run.stderr().contains("shards started") {
        assert!(Instant::now() < deadline, "{}", run.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    let all = threads(run.pid());
    let shards: Vec<_> = all
        .iter()
        .filter(|(_, name, _)| name.starts_with("strait-shard"))
        .collect();
    // One CPU listed: one shard, on it.
    assert_eq!(shards.len(), 1, "{all:?}");
    assert_eq!(shards[0].2, vec![shard_cpu], "{all:?}");
    let control = all
        .iter()
        .find(|(tid, _, _)| *tid == run.pid())
        .expect("the main thread");
    if mask.len() > 1 {
        let spare = *mask.iter().find(|c| **c != shard_cpu).unwrap();
        assert_eq!(control.2, vec![spare], "control thread: {all:?}");
        assert!(
            run.stderr().contains(&format!("control_cpu=\"{spare}\"")),
            "{}",
            run.stderr()
        );
    } else {
        // A one-CPU machine: nothing to keep it off; it shares the shard's CPU.
        assert_eq!(control.2, mask, "{all:?}");
    }
    drop(run);

    let cfg = testbed_mm2_config(&unique("cpus-none"), "strait.cpus = 4000-4001\n");
    let exit = Strait::start(Path::new(STRAIT), &cfg, &[]).wait(Duration::from_secs(60));
    assert_ne!(exit.code, Some(0), "{}", exit.stderr);
    assert!(
        exit.stderr.contains("strait.cpus lists CPUs 4000,4001"),
        "{}",
        exit.stderr
    );
}

#[test]
fn strait_cpus_pin_false_leaves_every_thread_on_the_whole_mask() {
    Testbed::get();
    let mask = allowed(&std::fs::read_to_string("/proc/self/status").unwrap());
    let cfg = testbed_mm2_config(&unique("cpus-none"), "strait.cpus.pin = false\n");
    let run = Strait::start(Path::new(STRAIT), &cfg, &["--shards", "2"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !run.stderr().contains("shards started") {
        assert!(Instant::now() < deadline, "{}", run.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    let all = threads(run.pid());
    let shards = all
        .iter()
        .filter(|(_, name, _)| name.starts_with("strait-shard"))
        .count();
    assert_eq!(shards, 2, "{all:?}");
    // No thread narrowed: each may run on every CPU the process may.
    for (_, name, cpus) in &all {
        assert_eq!(cpus, &mask, "{name}: {all:?}");
    }
    assert!(run.stderr().contains("not pinned"), "{}", run.stderr());
    drop(run);

    // Naming CPUs and refusing to pin contradict each other: refused, both keys named.
    let cfg = testbed_mm2_config(
        &unique("cpus-none"),
        "strait.cpus = 0\nstrait.cpus.pin = false\n",
    );
    let exit = Strait::start(Path::new(STRAIT), &cfg, &[]).wait(Duration::from_secs(60));
    assert_ne!(exit.code, Some(0), "{}", exit.stderr);
    assert!(
        exit.stderr
            .contains("strait.cpus names CPUs (0) but strait.cpus.pin is false"),
        "{}",
        exit.stderr
    );
}
