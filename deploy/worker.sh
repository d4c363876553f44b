#!/usr/bin/env bash
# One paperlake Celery worker on this machine: `deploy/worker.sh [NAME]`, from a checkout set up with
# `./run setup test` (or `pip install -e '.[distributed]' -c constraints.txt`), with deploy/paperlake.env edited.
# Each worker runs one step at a time (solo pool: the encoders use every core of the machine); start one per machine,
# or one per GPU with CUDA_VISIBLE_DEVICES set.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
set -a; . "${PAPERLAKE_ENV_FILE:-$here/paperlake.env}"; set +a
export PYTHONPATH="$here:$repo${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 DAGSTER_DISABLE_TELEMETRY=1
cd "$repo"
exec "$repo/.venv/bin/python" -m celery -A dagster_celery.app worker --pool solo -Q dagster \
  -n "${1:-worker}@%h" --prefetch-multiplier=1 -l INFO
