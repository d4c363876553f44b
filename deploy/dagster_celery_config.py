"""What ``celery -A dagster_celery.app worker`` reads (the module must be on the worker's PYTHONPATH): the broker and
the result backend, from the same variable paperlake's runs use."""

import os

broker_url = os.environ.get("PAPERLAKE_CELERY_BROKER", "redis://127.0.0.1:6379/0")
result_backend = os.environ.get("PAPERLAKE_CELERY_BACKEND", broker_url)
worker_prefetch_multiplier = 1  # a step is long: a worker takes the next one only when it is free
