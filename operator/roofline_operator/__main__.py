"""``python -m roofline_operator``: the same as ``roofline operator``."""

import sys

from roofline_operator.run.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
