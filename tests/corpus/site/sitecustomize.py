"""Starts the truth sidecar in every Python process of a corpus run (launchers, workers, Ray's
processes): the corpus generators put this folder first on ``PYTHONPATH`` and set ``CORPUS_TRUTH_DIR``.
Outside a corpus run it does nothing."""

import os

if os.environ.get("CORPUS_TRUTH_DIR"):
    from tests.corpus import sidecar

    sidecar.install()
