//! `scripts/dr-runbook.sh`, the README's DR runbook (smoke, verify, drill, unplanned failover,
//! failback, failover back), against the running test bed with the binary under test: every
//! step's command must succeed and say so.
#![forbid(unsafe_code)]

use std::process::Command;

use strait_tests::{Testbed, repo_root};

#[test]
fn the_dr_runbook_runs_as_the_readme_shows_it() {
    // Fails early, with the usual message, when the test bed is not up.
    Testbed::get();
    let out = Command::new(repo_root().join("scripts/dr-runbook.sh"))
        .env("DR_STRAIT_BIN", env!("CARGO_BIN_EXE_strait"))
        .env("DR_RECORDS", "5000")
        .output()
        .expect("scripts/dr-runbook.sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "dr-runbook.sh failed: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    for line in [
        "OK: the record reached the target identical, where the stored mapping says",
        "(full), 2 partitions, 5001 records compared, 5001 matched, 0 missing, 0 extra, 0 mismatched, 0 not yet copied",
        "OK: 2 partitions, 0 records skipped, 0 re-read",
        "OK: failed over (unplanned); strait no longer copies these topics",
        "20 records on the old source were never copied to the target; nothing was deleted",
        "(default replication policy) set up:",
        "OK: failed over; strait no longer copies these topics",
        "again, the groups at their positions above",
        "OK: restart strait (every instance of the flow) to copy them again",
        "OK: DR runbook complete.",
    ] {
        assert!(stdout.contains(line), "missing {line:?}\nstdout:\n{stdout}");
    }
    // The group went back by the forward flow's mapping, exactly.
    let back = stdout
        .lines()
        .filter(|l| l.ends_with("(mapping back)"))
        .count();
    assert!(back >= 1, "stdout:\n{stdout}");
}
