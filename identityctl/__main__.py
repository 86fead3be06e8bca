"""`python -m identityctl`: the same command as the `identityctl` console script."""

from identityctl.cli.main import run

run()
