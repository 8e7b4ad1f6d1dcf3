#!/bin/sh
# Installs ranklog from the wheels in /tmp/ranklog-wheels into its own virtualenv, /opt/ranklog (on the
# image's python3 >= 3.10), so it never touches the image's Python; then removes the wheels.
# Usage (in a Dockerfile): RUN sh /tmp/install-ranklog.sh "ranklog[agent]==0.1.0"
set -eu
python3 -m venv /opt/ranklog
/opt/ranklog/bin/pip install --no-cache-dir --disable-pip-version-check --no-index \
    --find-links /tmp/ranklog-wheels "$1"
rm -rf /tmp/ranklog-wheels /tmp/install-ranklog.sh
