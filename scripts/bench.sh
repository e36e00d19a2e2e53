#!/usr/bin/env bash
# Runs one bench scenario against strait and against Apache Kafka's MirrorMaker 2, on the same
# test-bed brokers in the same run, then regenerates perf/RESULTS.md and the plots.
#
# Usage: scripts/bench.sh SCENARIO [strait-bench run options...]
#        scripts/bench.sh all      every scenario below, one after the other
#   SCENARIO: catch-up, steady, many-partitions, codecs, small-batches, smoke, exactly-once and wan
#   (exactly-once: the catch-up and steady scenarios run twice each, strait and MM2 with
#   exactly-once off, then on: `<target>.exactly.once.source.support = enabled` for both, and for
#   MM2 `dedicated.mode.enable.internal.rest = true`, which its exactly-once needs in dedicated
#   mode; the measuring consumer reads read_committed either way. Results in
#   perf/results/exactly-once/<date>-<scenario>-eos-{off,on}.json, not in RESULTS.md)
#   (`scripts/bench-slow-link --wan`: strait, MM2 with defaults and MM2 tuned through a latency
#   proxy at 0, 25, 75 and 100 ms one way, three rounds; results in perf/results/wan/, not in
#   RESULTS.md; `all` leaves it out, it takes hours)
#   (catch-up and wan also run `strait-bench relay` once after the replicators, in the same
#   invocation: the CPU floor of a read()/write() and of a splice() relay moving 1 GiB over
#   loopback, the reference row of issue 27's "catch-up CPU s/GiB vs the relay, same run". Result
#   in perf/results/relay/<name of the scenario's result>-relay.json, not in RESULTS.md)
#   Options after the scenario go to `strait-bench run` (e.g. --records 100000,
#   --replicator mm2, --timeout-s 600; `strait-bench run --help` lists them).
#
# Steps: cargo build --release (strait, strait-bench), fetch Kafka if needed, `testbed up` (a
# running test bed is reused and never stopped), the run (JSON to
# perf/results/<date>-<scenario>.json), `strait-bench report` (perf/RESULTS.md), and
# perf/plot.py (PNGs in perf/plots/, matplotlib installed into a venv under the cache dir).
#
# Environment:
#   STRAIT_TESTBED_DIR, STRAIT_CACHE_DIR  as for scripts/testbed
#   STRAIT_BENCH_PLOTS=0                  skip the plots
#   STRAIT_BENCH_VENV                     the plotting venv [$STRAIT_CACHE_DIR/bench-venv]
#   STRAIT_BENCH_RELAY=0                  skip the relay floor after catch-up and wan
#   STRAIT_BENCH_RELAY_ROUNDS             the relay's rounds, each mode once per round [3]
set -euo pipefail
STRAIT_PROG=bench.sh
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

SCENARIOS=(catch-up steady many-partitions codecs small-batches smoke)

# The relay floor (`strait-bench relay`) beside a scenario's result, named after it: NAME is the
# result's file name without .json. Its failure is reported and returned, the scenario's result
# stays.
run_relay() {
  local name="$1" bin="$STRAIT_REPO_ROOT/target/release"
  [[ "${STRAIT_BENCH_RELAY:-1}" == 0 ]] && return 0
  mkdir -p "$STRAIT_REPO_ROOT/perf/results/relay"
  local out="$STRAIT_REPO_ROOT/perf/results/relay/$name-relay.json"
  strait_log "relay floor → $out"
  STRAIT_REPO_ROOT="$STRAIT_REPO_ROOT" "$bin/strait-bench" relay \
    --rounds "${STRAIT_BENCH_RELAY_ROUNDS:-3}" --json "$out" >&2
}

case "${1:-}" in
  "" | -h | --help)
    strait_usage "${BASH_SOURCE[0]}"
    [[ -n "${1:-}" ]] && exit 0
    exit 2
    ;;
esac
scenario="$1"
shift
if [[ "$scenario" == all ]]; then
  rc=0
  for s in "${SCENARIOS[@]}"; do
    [[ "$s" == smoke ]] && continue
    "${BASH_SOURCE[0]}" "$s" "$@" || rc=$?
  done
  exit "$rc"
fi
if [[ "$scenario" == exactly-once ]]; then
  rc=0
  for s in catch-up steady; do
    for eos in off on; do
      props=()
      if [[ "$eos" == on ]]; then
        props=(--prop 'strait:{target}.exactly.once.source.support=enabled'
          --prop 'mm2:{target}.exactly.once.source.support=enabled'
          --prop 'mm2:exactly.once.source.support=enabled'
          --prop 'mm2:dedicated.mode.enable.internal.rest=true')
      fi
      STRAIT_BENCH_OUT_SUFFIX="-eos-$eos" "${BASH_SOURCE[0]}" "$s" "${props[@]}" "$@" || rc=$?
    done
  done
  exit "$rc"
fi
if [[ "$scenario" == wan ]]; then
  rc=0
  "$STRAIT_SCRIPTS_DIR/bench-slow-link" --wan "$@" || rc=$?
  # bench-slow-link built the release binaries.
  run_relay "$(date -u +%Y-%m-%d-%H%M%S)-wan" || rc=$?
  exit "$rc"
fi
known=" ${SCENARIOS[*]} "
[[ "$known" == *" $scenario "* ]] || strait_die "unknown scenario '$scenario' (known: ${SCENARIOS[*]}, exactly-once, wan, all)"

cd "$STRAIT_REPO_ROOT"
export STRAIT_TESTBED_DIR STRAIT_CACHE_DIR

strait_log "building release binaries"
cargo build --release --quiet -p strait-control -p strait-bench
bin="$STRAIT_REPO_ROOT/target/release"

strait_ensure_kafka
"$STRAIT_SCRIPTS_DIR/testbed" up >&2

mkdir -p perf/results
# The exactly-once runs (STRAIT_BENCH_OUT_SUFFIX) go apart: they are not the scenario's result.
suffix="${STRAIT_BENCH_OUT_SUFFIX:-}" dir=perf/results
[[ -n "$suffix" ]] && dir=perf/results/exactly-once
mkdir -p "$dir"
out="$dir/$(date -u +%Y-%m-%d)-$scenario$suffix.json"
# A second run on the same day keeps the first: the time goes into the name.
[[ -e "$out" ]] && out="$dir/$(date -u +%Y-%m-%d-%H%M%S)-$scenario$suffix.json"

strait_log "running $scenario → $out"
rc=0
"$bin/strait-bench" run --scenario "$scenario" --replicator strait,mm2 --out "$out" \
  --repo "$STRAIT_REPO_ROOT" "$@" || rc=$?
if [[ ! -f "$out" ]]; then
  strait_die "the run wrote no result (exit $rc)"
fi
if [[ "$scenario" == catch-up ]]; then
  run_relay "$(basename "$out" .json)" || rc=$?
fi

"$bin/strait-bench" report --results perf/results --out perf/RESULTS.md

if [[ "${STRAIT_BENCH_PLOTS:-1}" != 0 ]]; then
  strait_plot perf/results perf/plots
fi
strait_log "done: $out, perf/RESULTS.md (exit $rc)"
exit "$rc"
