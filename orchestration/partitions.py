"""One dynamic partition per paper, keyed ``<volume>/<file stem>`` (see paperlake.inbox.paper_key_for)."""

import dagster as dg

papers = dg.DynamicPartitionsDefinition(name="papers")
