"""Dynamic partitions: one per paper, keyed ``<volume>/<file stem>`` (see paperlake.inbox.paper_key_for), and one per
volume."""

import dagster as dg

papers = dg.DynamicPartitionsDefinition(name="papers")
volumes = dg.DynamicPartitionsDefinition(name="volumes")  # one per conference volume (the first part of a paper key)
