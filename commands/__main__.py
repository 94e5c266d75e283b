"""`python -m jetwatch`: the same as the `jetwatch` command."""

import sys

from jetwatch.cli import main

sys.exit(main())
