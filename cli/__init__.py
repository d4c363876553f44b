"""`paperlake`, the command line: the top of the layout (it drives the Dagster runner and the agent, both above the
library); nothing imports it."""
