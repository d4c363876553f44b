"""The software-defined assets. Loading them is quiet: the Beta and Preview features they use (observable source
assets, backfill policies, partitioned asset checks, pools) are chosen on purpose, so Dagster's notices about them
say nothing a user can act on, in `dagster dev` or anywhere the definitions load."""

import warnings

import dagster as dg

warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)
