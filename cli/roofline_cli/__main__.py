"""``python -m roofline_cli``: the same as ``roofline``."""

import sys

from roofline_cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
