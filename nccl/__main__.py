"""``python -m nccl``: what nccl4py found on this machine (see nccl._diagnostics)."""
import sys

from nccl._diagnostics import main

if __name__ == "__main__":
    sys.exit(main())
