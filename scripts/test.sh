#!/usr/bin/env bash
# The project's full test command: formatting and lints first (fail fast), then every test of the
# workspace against a real Apache Kafka test bed (scripts/testbed).
#
# Steps: cargo fmt --check, cargo clippy -D warnings, shellcheck of every script in scripts/ (CI=true
# fails without shellcheck; elsewhere a missing one is logged),
# fetch Kafka, install Toxiproxy, build the tests, `readme-tables --check` (the READMEs' figures
# are those of the result files), `check-deploy` (the systemd units, the Kubernetes manifests
# and each pod's config, the Dockerfile's settings), a short run of every fuzz target
# (scripts/fuzz-smoke), `testbed up`, `systemd-smoke` (strait under the systemd unit, in a
# systemd-nspawn container), `oldkafka up 2.8 3.9` (the old-cluster tests' clusters,
# control/tests/legacy.rs), cargo test --workspace --all-targets, then every fault scenario in
# its short profile (`testbed up fsource ftarget`, tests/tests/faults.rs with
# STRAIT_FAULTS_PROFILE=short, each checked for its result row, their table), and `testbed down` /
# `oldkafka down` for what this run started (what was already up is left up).
# A test bed that does not come up fails the run: tests are never skipped for want of Kafka.
#
# Environment:
#   STRAIT_TEST_THREADS  test threads per test binary [2]: the two brokers idle while waiting on
#                        tests, and most integration tests wait on the brokers, so 2 fits 2 cores
#   STRAIT_TESTBED_DIR, STRAIT_CACHE_DIR and the other testbed variables (scripts/testbed --help)
# The tests see the variables of `scripts/testbed env` and STRAIT_REQUIRE_TESTBED=1.
set -euo pipefail
STRAIT_PROG=test.sh
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

case "${1:-}" in
  "") ;;
  -h | --help)
    strait_usage "${BASH_SOURCE[0]}"
    exit 0
    ;;
  *) strait_die "test.sh takes no arguments (see --help)" ;;
esac

STRAIT_TEST_THREADS="${STRAIT_TEST_THREADS:-2}"
[[ "$STRAIT_TEST_THREADS" =~ ^[1-9][0-9]*$ ]] || strait_die "STRAIT_TEST_THREADS must be a positive integer, got '$STRAIT_TEST_THREADS'"
export STRAIT_TEST_THREADS STRAIT_TESTBED_DIR STRAIT_CACHE_DIR
cd "$STRAIT_REPO_ROOT"

t0=$SECONDS
step_name="start"
started_file="$(mktemp "${TMPDIR:-/tmp}/strait-testbed-started.XXXXXX")"
fault_started_file="$(mktemp "${TMPDIR:-/tmp}/strait-testbed-started.XXXXXX")"
testbed_note="test bed: not started"

stop_testbed() {
  local started=()
  [[ -f "$started_file" ]] && mapfile -t started <"$started_file"
  [[ -f "$fault_started_file" ]] && mapfile -t -O "${#started[@]}" started <"$fault_started_file"
  rm -f "$started_file" "$fault_started_file"
  ((${#started[@]} > 0)) || return 0
  printf '\n==> testbed down %s (started by this run)\n' "${started[*]}" >&2
  if "$STRAIT_SCRIPTS_DIR/testbed" down "${started[@]}"; then
    testbed_note="test bed: started and stopped by this run"
  else
    testbed_note="test bed: started by this run, STOP FAILED (see above)"
  fi
}

old_kafka_started=()
finish() {
  local rc=$?
  trap - EXIT INT TERM
  # The old clusters of control/tests/legacy.rs that this run started.
  ((${#old_kafka_started[@]} == 0)) || "$STRAIT_SCRIPTS_DIR/oldkafka" down "${old_kafka_started[@]}" || true
  step_done
  stop_testbed
  printf '\ntest.sh: time per step:\n' >&2
  printf '  %s\n' "${step_times[@]}" >&2
  if ((rc == 0)); then
    printf '\ntest.sh: PASSED: fmt, clippy and all tests in %s s (%s)\n' "$((SECONDS - t0))" "$testbed_note"
  else
    printf '\ntest.sh: FAILED at step "%s" (exit %s) after %s s (%s)\n' "$step_name" "$rc" "$((SECONDS - t0))" "$testbed_note"
  fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Seconds each step took, for the summary at the end (CI has a time budget: which step grew).
step_times=()
step_t0=$SECONDS
step_done() {
  [[ "$step_name" == start ]] || step_times+=("$(printf '%5s s  %s' "$((SECONDS - step_t0))" "$step_name")")
  step_t0=$SECONDS
}

step() {
  step_done
  step_name="$1"
  printf '\n==> %s\n' "$1" >&2
}

step "cargo fmt --check"
cargo fmt --all -- --check

step "lock files current"
# The fuzz crate has its own lock file, built --locked at the fuzz smoke: a dependency added to
# the workspace must be added there too (cd fuzz && cargo tree). Checked here, in a second,
# rather than after the builds.
cargo tree --locked --workspace >/dev/null
(cd fuzz && cargo tree --locked >/dev/null)

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
# The fault scenarios are not a --workspace target (test = false in tests/Cargo.toml).
cargo clippy -p strait-tests --test faults -- -D warnings

step "shellcheck"
# Every shell script in scripts/ and scripts/lib/, found by its first line (a bash shebang or a
# `# shellcheck shell=` directive), so that a new script is linted without being listed here.
shell_scripts=(.ci/run)
for f in scripts/* scripts/lib/*; do
  [[ -f "$f" ]] || continue
  if head -n 1 -- "$f" | grep -qE '^#!.*[/ ](ba)?sh$|^# shellcheck shell=(ba)?sh'; then
    shell_scripts+=("$f")
  fi
done
if command -v shellcheck >/dev/null 2>&1; then
  shellcheck -x "${shell_scripts[@]}"
  strait_log "shellcheck: ${#shell_scripts[@]} scripts linted"
elif [[ "${CI:-}" == true ]]; then
  # .ci/run installs it: a CI run that lints nothing must not pass.
  strait_die "shellcheck is not installed, so the ${#shell_scripts[@]} scripts cannot be linted (Debian: apt-get install shellcheck)"
else
  strait_log "shellcheck is not installed: the ${#shell_scripts[@]} scripts were NOT linted (Debian: apt-get install shellcheck; under CI=true this fails)"
fi

step "fetch Kafka"
"$STRAIT_SCRIPTS_DIR/fetch-kafka"

step "install Toxiproxy"
"$STRAIT_SCRIPTS_DIR/install-toxiproxy"

# Compile before the brokers start, so compilation and two JVMs do not fight over 2 cores.
step "build tests"
cargo test --workspace --all-targets --no-run
cargo test -p strait-tests --test faults --no-run

# The README's and perf/README's figures are generated from the result files; a run recorded
# without regenerating them fails here (scripts/readme-tables rewrites them).
step "README figures current"
"$STRAIT_SCRIPTS_DIR/readme-tables" --check

# deploy/: the units verified, the manifests rendered and checked offline, `strait check` on each
# pod's config (distinct static member ids). Uses the strait binary the test build made.
step "deploy files"
"$STRAIT_SCRIPTS_DIR/check-deploy" --strait "${CARGO_TARGET_DIR:-target}/debug/strait"

# Every fuzz target built with coverage instrumentation and run a few seconds from its seeds
# (long runs: fuzz/README.md). Before the brokers start, for the same reason as the build.
step "fuzz smoke"
"$STRAIT_SCRIPTS_DIR/fuzz-smoke"

step "testbed up"
if ! "$STRAIT_SCRIPTS_DIR/testbed" up --started-file "$started_file"; then
  testbed_note="test bed: did NOT come up"
  strait_die "the Kafka test bed did not come up (see above; logs under $STRAIT_TESTBED_DIR); tests need it, so the run fails"
fi
testbed_note="test bed: already running, left up"
[[ -s "$started_file" ]] && testbed_note="test bed: started by this run"
eval "$("$STRAIT_SCRIPTS_DIR/testbed" env)"
export STRAIT_REQUIRE_TESTBED=1

# strait started under deploy/systemd/strait.service by a real systemd, booted in a container
# (PID 1 here is not systemd): user, hardening, io_uring, reload, restart, stop (13 s).
step "systemd smoke"
if command -v systemd-nspawn >/dev/null 2>&1 && ((EUID == 0)); then
  "$STRAIT_SCRIPTS_DIR/systemd-smoke" --strait "${CARGO_TARGET_DIR:-target}/debug/strait"
elif [[ "${CI:-}" == true ]]; then
  strait_die "systemd-nspawn (Debian: systemd-container) and root are needed to start strait under systemd"
else
  strait_log "systemd-nspawn or root missing: strait was NOT started under systemd (Debian: apt-get install systemd-container; under CI=true this fails)"
fi

# Kafka 2.8.2 (ZooKeeper) and 3.9.1 (KRaft) for control/tests/legacy.rs, started side by side
# (17 s for both against 10 s for 2.8 alone on a busy 2-core machine; the 3.9 tests add about a
# minute to cargo test, and a clean clone fetches the 3.9 jars once, about 30 s).
step "old Kafka 2.8 and 3.9 up"
for v in 2.8 3.9; do
  "$STRAIT_SCRIPTS_DIR/oldkafka" status "$v" >/dev/null 2>&1 || old_kafka_started+=("$v")
done
if ((${#old_kafka_started[@]} > 0)); then
  "$STRAIT_SCRIPTS_DIR/oldkafka" fetch "${old_kafka_started[@]}"
  old_pids=()
  for v in "${old_kafka_started[@]}"; do
    "$STRAIT_SCRIPTS_DIR/oldkafka" up "$v" &
    old_pids+=("$!")
  done
  for pid in "${old_pids[@]}"; do
    wait "$pid" || strait_die "an old Kafka cluster did not come up (see above; logs under $STRAIT_TESTBED_DIR/old-*); control/tests/legacy.rs needs it, so the run fails"
  done
fi

step "cargo test"
# RUST_TEST_THREADS rather than --test-threads: criterion benches (run once as tests here) take
# no libtest flags.
RUST_TEST_THREADS="$STRAIT_TEST_THREADS" cargo test --workspace --all-targets

# The fault scenarios need the three-broker clusters; they are not part of --workspace (test =
# false in tests/Cargo.toml) and run here, one at a time, in their short profile.
step "fault clusters up"
if ! "$STRAIT_SCRIPTS_DIR/testbed" up --started-file "$fault_started_file" fsource ftarget; then
  strait_die "the fault clusters did not come up (see above; logs under $STRAIT_TESTBED_DIR); the fault tests need them, so the run fails"
fi
eval "$("$STRAIT_SCRIPTS_DIR/testbed" env)"

# Every scenario of tests/tests/faults.rs, short profile, one at a time (829 s on 2 cores at load
# average 14, tests/faults/RESULTS.md; scripts/faults.sh --full runs the long versions): test name
# = the scenario of the row it writes. The list must be the test binary's (a scenario added,
# renamed or removed fails here until it is listed), and each scenario must have written its row
# (a test that ran nothing, or returned before recording, fails).
FAULT_SCENARIOS=(
  leader_moves=leader-moves
  rolling_restart=rolling-restart
  sigterm_during_target_outage=sigterm-in-target-outage
  sigterm_on_a_slow_source=sigterm-slow-source
  slow_source=slow-source
  slow_target=slow-target
  source_black_hole=source-black-hole
  source_connection_resets=source-resets
  source_unclean_election=source-unclean-election
  source_unclean_election_while_strait_is_down=source-unclean-election-while-down
  strait_sigkilled_repeatedly=strait-sigkill
  strait_sigkilled_restart_after_settle=strait-sigkill-settled
  target_black_hole=target-black-hole
  target_broker_killed_and_left_down=target-broker-killed
  target_connection_resets=target-resets
  target_group_coordinator_killed=target-coordinator-killed
)
fault_tests=("${FAULT_SCENARIOS[@]%%=*}")
step "fault tests (short profile, all ${#fault_tests[@]} scenarios)"
listed="$(cargo test -q -p strait-tests --test faults -- --list --format terse | sed -n 's/: test$//p' | sort)"
selected="$(printf '%s\n' "${fault_tests[@]}" | sort)"
if [[ "$listed" != "$selected" ]]; then
  strait_die "FAULT_SCENARIOS in scripts/test.sh is not the list of tests/tests/faults.rs (< listed by the test binary, > in FAULT_SCENARIOS):
$(diff <(printf '%s\n' "$listed") <(printf '%s\n' "$selected") | grep '^[<>]' || true)"
fi
fault_results="$STRAIT_TESTBED_DIR/faults/results-test-sh-$$.tsv"
mkdir -p "$(dirname "$fault_results")"

# Runs the fault scenarios ENTRY... (test=row name) in their short profile, one at a time, with
# STRAIT_FAULTS_EXACTLY_ONCE=EOS; prints their rows; fails when one failed or wrote no row (a
# test that ran nothing, or returned before recording).
run_fault_scenarios() {
  local what="$1" eos="$2" entry rc=0 t0=$SECONDS no_row=()
  shift 2
  : >"$fault_results"
  STRAIT_FAULTS_PROFILE=short STRAIT_FAULTS_RESULTS="$fault_results" STRAIT_FAULTS_EXACTLY_ONCE="$eos" \
    cargo test -p strait-tests --test faults -- --test-threads=1 --exact "${@%%=*}" || rc=$?
  printf '\n%s in %s s (short profile; scenario, produced, source, found, lost, duplicated, out of order, recovery s, max RSS MiB, notes):\n' "$what" "$((SECONDS - t0))" >&2
  cat "$fault_results" >&2
  ((rc == 0)) || strait_die "$what failed (exit $rc; see above)"
  for entry in "$@"; do
    cut -f1 "$fault_results" | grep -qxF -- "${entry#*=}" || no_row+=("${entry%%=*} (${entry#*=})")
  done
  ((${#no_row[@]} == 0)) || strait_die "$what: no result row from ${no_row[*]}"
}
run_fault_scenarios "fault scenarios" 0 "${FAULT_SCENARIOS[@]}"

# The same scenarios with exactly-once forwarding on fail on any duplicate a read_committed
# consumer of the target sees. Those where a broker or strait itself dies, restarts or stops
# answering run here; scripts/faults.sh --exactly-once runs them all.
FAULT_SCENARIOS_EOS=(
  strait_sigkilled_repeatedly=strait-sigkill-eos
  rolling_restart=rolling-restart-eos
  target_broker_killed_and_left_down=target-broker-killed-eos
  target_connection_resets=target-resets-eos
  sigterm_during_target_outage=sigterm-in-target-outage-eos
)
step "fault tests with exactly-once (short profile, ${#FAULT_SCENARIOS_EOS[@]} scenarios)"
run_fault_scenarios "fault scenarios with exactly-once" 1 "${FAULT_SCENARIOS_EOS[@]}"
