#!/usr/bin/env bash
# The fault suite (issue 16): `strait run` between the three-broker fault clusters (fsource ->
# ftarget, behind Toxiproxy) under continuous production by kafka-verifiable-producer, one fault
# per scenario (tests/tests/faults.rs), every record checked; prints the table of the run
# (scenario, records produced, found, lost, duplicated, out of order, recovery s, max RSS).
#
# Usage: scripts/faults.sh [--full] [--exactly-once] [--keep] [--results FILE] [FILTER...]
#   --full     the long version (20 SIGKILLs, 60 s outages, larger volumes); default: the short one
#   --exactly-once  the scenarios with exactly-once forwarding on (`T.exactly.once.source.support
#              = enabled`): rows named <scenario>-eos, and any duplicate a read_committed
#              consumer of the target sees fails the scenario
#   --keep     leave the fault clusters running afterwards (default: stop what this run started)
#   --results  also write the table (Markdown) to FILE
#   FILTER     run only the scenarios whose test name contains it (cargo test filters)
#
# Steps: install Toxiproxy if missing (scripts/install-toxiproxy), build strait and the fault
# tests, `testbed up fsource ftarget`, `cargo test -p strait-tests --test faults` one scenario at
# a time, the table, `testbed down` of what it started. Exit status: the tests'.
#
# Environment: STRAIT_FAULTS_SEED (random SIGKILL moments), the test bed's variables
# (scripts/testbed --help: ports, STRAIT_TOXIPROXY_PORT, STRAIT_TOXIPROXY_DIR, ...).
set -euo pipefail
STRAIT_PROG=faults.sh
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

profile=short eos=0 keep=0 results_out="" filters=()
while (($# > 0)); do
  case "$1" in
    --full) profile=full ;;
    --exactly-once) eos=1 ;;
    --keep) keep=1 ;;
    --results)
      (($# >= 2)) || strait_die "--results needs a file"
      results_out="$2"
      shift
      ;;
    -h | --help)
      strait_usage "${BASH_SOURCE[0]}"
      exit 0
      ;;
    -*) strait_die "unknown option '$1' (see --help)" ;;
    *) filters+=("$1") ;;
  esac
  shift
done
export STRAIT_TESTBED_DIR STRAIT_CACHE_DIR
cd "$STRAIT_REPO_ROOT"

started_file="$(mktemp "${TMPDIR:-/tmp}/strait-faults-started.XXXXXX")"
# shellcheck disable=SC2317 # called by the EXIT trap
finish() {
  local rc=$? started=()
  trap - EXIT INT TERM
  [[ -f "$started_file" ]] && mapfile -t started <"$started_file"
  rm -f "$started_file"
  if ((keep == 0 && ${#started[@]} > 0)); then
    printf '\n==> testbed down %s (started by this run)\n' "${started[*]}" >&2
    "$STRAIT_SCRIPTS_DIR/testbed" down "${started[@]}" || rc=1
  fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$STRAIT_SCRIPTS_DIR/install-toxiproxy"
printf '\n==> build strait and the fault tests\n' >&2
cargo build -p strait-control --bin strait
cargo test -p strait-tests --test faults --no-run

printf '\n==> testbed up fsource ftarget\n' >&2
"$STRAIT_SCRIPTS_DIR/testbed" up --started-file "$started_file" fsource ftarget

results="$STRAIT_TESTBED_DIR/faults/results-$(date +%Y%m%d-%H%M%S)-$$.tsv"
mkdir -p "$(dirname "$results")"
: >"$results"
t0=$SECONDS
printf '\n==> fault scenarios (%s profile%s), rows in %s\n' "$profile" \
  "$( ((eos)) && echo ", exactly-once")" "$results" >&2
rc=0
STRAIT_FAULTS_PROFILE="$profile" STRAIT_FAULTS_RESULTS="$results" STRAIT_FAULTS_EXACTLY_ONCE="$eos" \
  cargo test -p strait-tests --test faults -- --test-threads=1 "${filters[@]}" || rc=$?

# The table, from the rows the scenarios appended (tab-separated; notes last).
table="$(awk -F'\t' '
  BEGIN { print "| scenario | produced | source | found | lost | duplicated | out of order | recovery s | max RSS MiB |"
          print "|---|---|---|---|---|---|---|---|---|" }
  NF >= 9 { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9
            # Concatenated, not sprintf: mawk limits sprintf to 8 KiB and notes can be longer.
            if ($10 != "") notes = notes "- **" $1 "**: " $10 "\n" }
  END { if (notes != "") printf "\n%s", notes }' "$results")"
summary="fault suite ($profile profile): $(grep -c . "$results" || true) scenarios in $((SECONDS - t0)) s on $(nproc) cores, $(uname -srm), seed ${STRAIT_FAULTS_SEED:-from the clock (see the log)}"
printf '\n%s\n\n%s\n' "$summary" "$table"
if [[ -n "$results_out" ]]; then
  printf '%s\n\n%s\n' "$summary" "$table" >"$results_out"
  strait_log "table written to $results_out"
fi
exit "$rc"
