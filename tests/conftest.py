"""Shared test set-up: Spark's worker interpreter and Hypothesis profiles.

Kept light on purpose: importing this module must not start Spark or touch disk.
"""

import os
import sys

from hypothesis import settings

# Spark workers must run the same interpreter (the venv's) as the tests.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

# "ci" (the default): no per-example deadline, since shared CI machines stall
# unpredictably, and 50 examples per property to keep the suite quick.
# "thorough": many more examples, for a local hunt. Pick with HYPOTHESIS_PROFILE=...
settings.register_profile("ci", deadline=None, max_examples=50)
settings.register_profile("thorough", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
