"""``python -m irkernel.cli``: the same as the ``irkernel`` console script."""

from __future__ import annotations

import sys

from irkernel.cli.main import main

sys.exit(main())
