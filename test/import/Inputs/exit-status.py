#!/usr/bin/env python3
"""exit-status.py COMMAND...: runs COMMAND, passes its output through and
prints `exit status N` last, so that FileCheck can check the status."""
import subprocess
import sys

sys.stdout.flush()
status = subprocess.call(sys.argv[1:])
print(f"exit status {status}", flush=True)
