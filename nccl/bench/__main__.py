import sys

from nccl.bench.cli import main

sys.exit(main())
