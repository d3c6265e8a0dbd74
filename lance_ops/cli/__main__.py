import sys

from .table import main

sys.exit(main())
