"""Writes the table of dp-accounting PLD values that the PLD accountant is
checked against (test/privacy/pld_reference.tsv, read by the GoogleTest
PldAccountant.MatchesDpAccountingTable, so the check runs without Python).

Usage: generate_pld_table.py PATH/TO/dpc-privacy > test/privacy/pld_reference.tsv

Grid: every (q, sigma, steps) with q in {1e-4, 1e-3, 1e-2, 0.1}, sigma in
{0.5, 1, 2, 5}, steps in {1, 10, 100, 1e3, 1e4, 1e5}, each at delta in
{1e-8, 1e-5, 1e-3}, plus compositions of several (q, sigma) segments. For
each, dp-accounting's PLDAccountant (add-or-remove neighbours, pessimistic
connect-the-dots) is run at the loss grid interval that dpc-privacy uses by
default for it (asked from the tool: 1e-4, finer where one step's losses are
small next to it, coarser where the composition would exceed the
accountant's size limit; for several segments the finest of theirs), and the
test runs on the same grid. Rows:

  epsilon  SEGMENTS  INTERVAL  DELTA    dp-accounting's epsilon for DELTA
  delta    SEGMENTS  INTERVAL  EPSILON  dp-accounting's delta for EPSILON

SEGMENTS is q/sigma/steps[,q/sigma/steps...]. The delta rows probe half of
the epsilon at delta = 1e-5. A row where dp-accounting's answer is not
finite is left out: above epsilon ~ 700, exp(-loss) underflows in its
get_epsilon_for_delta, which then returns inf or the loss of a grid point
(rounded up, so still within 1 % here). Takes a few minutes (dp-accounting
composes in Python and numpy).
"""

import datetime
import json
import logging
import math
import subprocess
import sys
from importlib import metadata

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant

Q_VALUES = [1e-4, 1e-3, 1e-2, 0.1]
SIGMA_VALUES = [0.5, 1.0, 2.0, 5.0]
STEP_VALUES = [1, 10, 100, 1000, 10000, 100000]
DELTA_VALUES = [1e-8, 1e-5, 1e-3]

# Schedules whose q or sigma change during training.
MULTI_SEGMENT_CASES = [
    [(0.01, 1.0, 1000), (0.02, 1.0, 1000)],
    [(0.001, 0.8, 5000), (0.001, 1.5, 20000), (0.004, 2.0, 1000)],
    [(0.1, 3.0, 10), (1e-4, 0.6, 100000)],
]


def tool_interval(tool, segments):
  """The loss grid dpc-privacy uses by default for one segment, or the finest
  of the segments' grids."""
  intervals = []
  for q, sigma, steps in segments:
    result = subprocess.run(
        [tool, "epsilon", "--accountant", "pld", "--q", repr(q), "--sigma",
         repr(sigma), "--steps", str(steps), "--delta", "1e-5", "--json"],
        capture_output=True, text=True, check=True)
    intervals.append(json.loads(result.stdout)["interval"])
  return min(intervals)


def reference_accountant(segments, interval):
  accountant = pld_privacy_accountant.PLDAccountant(
      value_discretization_interval=interval)
  for q, sigma, steps in segments:
    accountant.compose(
        dp_accounting.PoissonSampledDpEvent(
            q, dp_accounting.GaussianDpEvent(sigma)), steps)
  return accountant


def segments_text(segments):
  return ",".join(f"{q!r}/{sigma!r}/{steps}" for q, sigma, steps in segments)


def main():
  if len(sys.argv) != 2:
    print(__doc__)
    return 2
  tool = sys.argv[1]
  logging.getLogger("absl").setLevel(logging.ERROR)
  cases = [[(q, sigma, steps)] for q in Q_VALUES for sigma in SIGMA_VALUES
           for steps in STEP_VALUES]
  cases += MULTI_SEGMENT_CASES

  print("# dp-accounting "
        f"{metadata.version('dp-accounting')} PLDAccountant values, written by "
        f"test/privacy/generate_pld_table.py on {datetime.date.today()}")
  print("# query\tsegments\tinterval\tgiven\texpected")
  for segments in cases:
    interval = tool_interval(tool, segments)
    accountant = reference_accountant(segments, interval)
    text = segments_text(segments)
    for delta in DELTA_VALUES:
      epsilon = accountant.get_epsilon(delta)
      if math.isfinite(epsilon):
        print(f"epsilon\t{text}\t{interval!r}\t{delta!r}\t{epsilon!r}")
    probe = 0.5 * accountant.get_epsilon(1e-5)
    print(f"delta\t{text}\t{interval!r}\t{probe!r}\t"
          f"{float(accountant.get_delta(probe))!r}")
    sys.stdout.flush()
  return 0


if __name__ == "__main__":
  sys.exit(main())
