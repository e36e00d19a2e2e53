#!/usr/bin/env bash
# Demo: fetches Kafka, starts the two-cluster test bed and shows its status.
# Replication is not wired in yet; this will grow into an end-to-end demo of strait.
# The test bed is left running; stop it with scripts/testbed down.
set -euo pipefail
STRAIT_PROG=demo
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

"$STRAIT_SCRIPTS_DIR/fetch-kafka"
"$STRAIT_SCRIPTS_DIR/testbed" up
"$STRAIT_SCRIPTS_DIR/testbed" status
cat <<MSG

Two Kafka $KAFKA_VERSION clusters are running (state in $STRAIT_TESTBED_DIR):
  source  $(sed -n 's/^export STRAIT_SOURCE_BOOTSTRAP=//p' "$STRAIT_TESTBED_DIR/testbed.env")
  target  $(sed -n 's/^export STRAIT_TARGET_BOOTSTRAP=//p' "$STRAIT_TESTBED_DIR/testbed.env")
Try: scripts/kafka-tool kafka-topics --bootstrap-server 127.0.0.1:19092 --list

Replication is not wired yet: strait does not copy anything between them in this demo.
Stop the clusters with: scripts/testbed down
MSG
