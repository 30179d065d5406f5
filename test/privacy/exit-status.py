"""Runs a command and succeeds only if it exits with the given status.

Usage: exit-status.py STATUS COMMAND [ARGS...]

Its output passes through (for FileCheck). lit's `not` only checks that a
command fails; dpc-privacy promises 1 for impossible requests and 2 for usage
errors.
"""

import subprocess
import sys


def main():
  expected = int(sys.argv[1])
  status = subprocess.run(sys.argv[2:], check=False).returncode
  if status != expected:
    print(f"exit-status.py: expected exit status {expected}, got {status}",
          file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
