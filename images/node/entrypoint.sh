#!/bin/sh
# Entrypoint of the ranklog node image: start the agent in the background, run the training
# command under `ranklog run` (stdout/stderr become per-rank records; the console output is
# unchanged), then give the agent time to ship the last lines before the container exits with the
# command's status. SIGTERM/SIGINT are passed to the training command.
#
# Environment: RANKLOG_ARCHIVE (archive URL[,URL...]; unset = capture only, no agent),
# RANKLOG_TOKEN_FILE (default /run/secrets/ranklog-token), RANKLOG_LOG_DIR (/var/log/ranklog),
# RANKLOG_STATE_DIR (/var/lib/ranklog-agent; mount a volume to keep checkpoints across runs),
# RANKLOG_METRICS_LISTEN (0.0.0.0:9465), RANKLOG_AGENT_ARGS (extra agent flags, e.g. --preset ray),
# RANKLOG_DRAIN_TIMEOUT (seconds to wait for the agent to ship everything, default 60).
set -u
if [ "$#" -eq 0 ]; then
  echo "ranklog-entrypoint: give the training command, e.g. python train.py" >&2
  exit 2
fi
if [ -z "${RANKLOG_ARCHIVE:-}" ]; then
  exec /opt/ranklog/bin/ranklog run -- "$@"
fi

# shellcheck disable=SC2086 # RANKLOG_AGENT_ARGS is a list of flags
/opt/ranklog/bin/ranklog agent \
  --archive "$RANKLOG_ARCHIVE" \
  --token-file "${RANKLOG_TOKEN_FILE:-/run/secrets/ranklog-token}" \
  --state-dir "${RANKLOG_STATE_DIR:-/var/lib/ranklog-agent}" \
  --metrics-listen "${RANKLOG_METRICS_LISTEN:-0.0.0.0:9465}" \
  --preset ranklog --ranklog-log-dir "$RANKLOG_LOG_DIR" \
  ${RANKLOG_AGENT_ARGS:-} &
agent=$!

/opt/ranklog/bin/ranklog run -- "$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
# `wait` returns early when a trapped signal arrives: keep waiting until the command is gone.
while :; do
  wait "$child"
  status=$?
  kill -0 "$child" 2>/dev/null || break
done
trap - TERM INT

/opt/ranklog/bin/python /opt/ranklog/drain.py \
  --metrics "${RANKLOG_METRICS_LISTEN:-0.0.0.0:9465}" --log-dir "$RANKLOG_LOG_DIR" \
  --timeout "${RANKLOG_DRAIN_TIMEOUT:-60}" --agent-pid "$agent" || true
kill -TERM "$agent" 2>/dev/null
wait "$agent" 2>/dev/null
exit "$status"
