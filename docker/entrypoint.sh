#!/bin/sh
# Container entrypoint: run the broker in the foreground so SIGTERM reaches it (clean shutdown).
# Arguments are passed to `minikafka serve`; MINIKAFKA_* env vars override config keys.
set -e
exec minikafka serve "$@"
