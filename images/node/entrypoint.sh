#!/bin/sh
# Entrypoint of the ranklog node image: start the agent in the background, run the training
# command under `ranklog run` (stdout/stderr become per-rank records; the console output is
# unchanged), then give the agent time to ship the last lines before the container exits with the
# command's status. SIGTERM/SIGINT are passed to the training command.
#
# Environment: the agent reads its configuration from RANKLOG_AGENT_<KEY> variables (one scheme
# for every key, see README "Configuration"; the image sets TOKEN_FILE, STATE_DIR, METRICS_LISTEN,
# PRESET). RANKLOG_AGENT_ARCHIVE (archive URL[,URL...]) unset = capture only, no agent.
# RANKLOG_LOG_DIR is where `ranklog run` writes and the ranklog preset reads (/var/log/ranklog);
# RANKLOG_DRAIN_TIMEOUT (seconds to wait for the agent to ship everything, default 60) is the
# entrypoint's own.
set -u
if [ "$#" -eq 0 ]; then
  echo "ranklog-entrypoint: give the training command, e.g. python train.py" >&2
  exit 2
fi
if [ -z "${RANKLOG_AGENT_ARCHIVE:-}" ]; then
  exec /opt/ranklog/bin/ranklog run -- "$@"
fi

/opt/ranklog/bin/ranklog agent &
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
  --metrics "$RANKLOG_AGENT_METRICS_LISTEN" --log-dir "${RANKLOG_AGENT_RANKLOG_LOG_DIR:-$RANKLOG_LOG_DIR}" \
  --timeout "${RANKLOG_DRAIN_TIMEOUT:-60}" --agent-pid "$agent" || true
kill -TERM "$agent" 2>/dev/null
wait "$agent" 2>/dev/null
exit "$status"
