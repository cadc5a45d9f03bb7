"""``python -m pbr_core.cli``: the ``pbr-calib`` command."""

import sys

from pbr_core.cli import main

sys.exit(main())
