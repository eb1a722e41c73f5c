#!/usr/bin/env bash
# Idempotent set-up on a fresh machine: a virtualenv with the project (and test extras), plus kcat.
#   scripts/setup.sh          runtime only
#   scripts/setup.sh test     runtime + test dependencies (incl. the `spark` extra) + kcat (Debian package)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# the stamp covers the C extension source too: a change to it alone must rebuild the editable install
STAMP="$VENV/.installed-$(cat pyproject.toml protocol/_recordscan.c | sha1sum | cut -c1-12)-${1:-run}"
if [ ! -f "$STAMP" ]; then
  "$VENV/bin/pip" install -q --upgrade pip==26.3
  if [ "${1:-}" = "test" ]; then
    "$VENV/bin/pip" install -q -e '.[test,spark]'
  else
    "$VENV/bin/pip" install -q -e .
  fi
  touch "$STAMP"
fi
if [ "${1:-}" = "test" ]; then
  # Debian packages the tests need: kcat, and a JDK + Maven for the Apache Kafka reference lab.
  missing=""
  command -v kcat >/dev/null 2>&1 || missing="$missing kcat"
  command -v java >/dev/null 2>&1 || missing="$missing openjdk-17-jdk-headless"
  command -v mvn >/dev/null 2>&1 || missing="$missing maven"
  if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
  fi
fi
