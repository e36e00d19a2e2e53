#!/usr/bin/env bash
# The project's full test command: formatting and lints first (fail fast), then every test of the
# workspace against a real Apache Kafka test bed (scripts/testbed).
#
# Steps: cargo fmt --check, cargo clippy -D warnings, shellcheck of scripts/ (when installed),
# fetch Kafka, build the tests, `testbed up`, cargo test --workspace --all-targets, and
# `testbed down` for the clusters this run started (a test bed that was already up is left up).
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
testbed_note="test bed: not started"

stop_testbed() {
  local started=()
  [[ -f "$started_file" ]] && mapfile -t started <"$started_file"
  rm -f "$started_file"
  ((${#started[@]} > 0)) || return 0
  printf '\n==> testbed down %s (started by this run)\n' "${started[*]}" >&2
  if "$STRAIT_SCRIPTS_DIR/testbed" down "${started[@]}"; then
    testbed_note="test bed: started and stopped by this run"
  else
    testbed_note="test bed: started by this run, STOP FAILED (see above)"
  fi
}

finish() {
  local rc=$?
  trap - EXIT INT TERM
  stop_testbed
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

step() {
  step_name="$1"
  printf '\n==> %s\n' "$1" >&2
}

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "shellcheck"
if command -v shellcheck >/dev/null 2>&1; then
  shellcheck -x scripts/fetch-kafka scripts/testbed scripts/kafka-tool scripts/test.sh scripts/demo.sh \
    scripts/lib/common.sh .ci/run
else
  strait_log "shellcheck is not installed: the scripts were NOT linted (Debian: apt-get install shellcheck)"
fi

step "fetch Kafka"
"$STRAIT_SCRIPTS_DIR/fetch-kafka"

# Compile before the brokers start, so compilation and two JVMs do not fight over 2 cores.
step "build tests"
cargo test --workspace --all-targets --no-run

step "testbed up"
if ! "$STRAIT_SCRIPTS_DIR/testbed" up --started-file "$started_file"; then
  testbed_note="test bed: did NOT come up"
  strait_die "the Kafka test bed did not come up (see above; logs under $STRAIT_TESTBED_DIR); tests need it, so the run fails"
fi
testbed_note="test bed: already running, left up"
[[ -s "$started_file" ]] && testbed_note="test bed: started by this run"
eval "$("$STRAIT_SCRIPTS_DIR/testbed" env)"
export STRAIT_REQUIRE_TESTBED=1

step "cargo test"
# RUST_TEST_THREADS rather than --test-threads: criterion benches (run once as tests here) take
# no libtest flags.
RUST_TEST_THREADS="$STRAIT_TEST_THREADS" cargo test --workspace --all-targets
