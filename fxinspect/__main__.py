"""``python -m fxinspect MODULE:CALLABLE --input-shape ...``"""

import sys

from .cli import main

sys.exit(main())
