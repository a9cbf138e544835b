"""Run the CLI as ``python -m secmeta.core.cli``."""

import sys

from secmeta.core.cli import main

sys.exit(main())
