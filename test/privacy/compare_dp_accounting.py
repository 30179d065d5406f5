"""Compares dpc-privacy with Google's dp-accounting (the reference accountant).

Usage: compare_dp_accounting.py PATH/TO/dpc-privacy

For a grid of (q, sigma, steps, delta) it asks `dpc-privacy epsilon
--accountant rdp --json` and dp_accounting.rdp.RdpAccountant with
PoissonSampledDpEvent(q, GaussianDpEvent(sigma)) composed `steps` times for
epsilon; then for a set of targets it asks `dpc-privacy sigma --accountant rdp
--json` and dp_accounting's calibrate_dp_mechanism for the noise multiplier.
Fails if any relative difference exceeds the tolerance. Run by ctest (test
`privacy-vs-dp-accounting`) with the interpreter of the project's .venv.
"""

import itertools
import json
import logging
import subprocess
import sys

import dp_accounting
from dp_accounting import mechanism_calibration

# The accountant mirrors dp-accounting's orders and formulas, so the
# agreement is to rounding (~1e-12); the brief's bound is 1 %.
EPSILON_TOLERANCE = 1e-2
# The calibrations stop at relative widths of 1e-7 (ours) and 1e-9 * sigma
# (brentq's xtol below).
SIGMA_TOLERANCE = 1e-4

Q_VALUES = [1e-4, 1e-3, 1e-2, 0.05, 0.2, 0.5]
SIGMA_VALUES = [0.5, 0.8, 1.0, 2.0, 4.0, 10.0]
STEP_VALUES = [1, 10, 1000, 10000, 100000]
DELTA_VALUES = [1e-5, 1e-6, 1e-8]

# (target epsilon, delta, q, steps)
CALIBRATION_CASES = [
    (8.0, 1e-5, 256 / 60000, 2000),
    (3.0, 1e-5, 0.01, 10000),
    (1.0, 1e-6, 1e-3, 100000),
    (0.5, 1e-8, 1e-4, 100000),
    (2.0, 1e-5, 0.5, 10),
    (10.0, 1e-6, 0.05, 1000),
    (1.0, 1e-5, 0.2, 1),
    (4.0, 1e-8, 0.02, 5000),
]


def epsilon_cases():
  """36 cases: every (q, sigma) pair, steps and delta cycling through their
  values so that each appears with many rates and noise levels."""
  for i, (q, sigma) in enumerate(itertools.product(Q_VALUES, SIGMA_VALUES)):
    yield q, sigma, STEP_VALUES[i % len(STEP_VALUES)], DELTA_VALUES[
        i % len(DELTA_VALUES)]


def run_tool(tool, *args):
  result = subprocess.run([tool, *args, "--json"], capture_output=True,
                          text=True, check=False)
  if result.returncode != 0:
    raise RuntimeError(f"{tool} {' '.join(args)} failed "
                       f"({result.returncode}): {result.stderr}")
  return json.loads(result.stdout)


def reference_epsilon(q, sigma, steps, delta):
  accountant = dp_accounting.rdp.RdpAccountant()
  accountant.compose(
      dp_accounting.PoissonSampledDpEvent(q,
                                          dp_accounting.GaussianDpEvent(sigma)),
      steps)
  return accountant.get_epsilon_and_optimal_order(delta)


def reference_sigma(target, delta, q, steps, guess):
  """dp-accounting's own calibration, bracketed around `guess`."""
  return mechanism_calibration.calibrate_dp_mechanism(
      dp_accounting.rdp.RdpAccountant,
      lambda sigma: dp_accounting.SelfComposedDpEvent(
          dp_accounting.PoissonSampledDpEvent(
              q, dp_accounting.GaussianDpEvent(sigma)), steps),
      target,
      delta,
      bracket_interval=mechanism_calibration.ExplicitBracketInterval(
          0.5 * guess, 2.0 * guess),
      tol=1e-9 * guess)


def relative_difference(value, reference):
  if value == reference:
    return 0.0
  return abs(value - reference) / max(abs(reference), 1e-300)


def main():
  if len(sys.argv) != 2:
    print(__doc__)
    return 2
  tool = sys.argv[1]
  # dp-accounting warns for every order whose series it drops; so do we,
  # silently.
  logging.getLogger("absl").setLevel(logging.ERROR)

  failures = []
  worst_epsilon = 0.0
  count = 0
  for q, sigma, steps, delta in epsilon_cases():
    ours = run_tool(tool, "epsilon", "--accountant", "rdp", "--q", repr(q),
                    "--sigma", repr(sigma), "--steps", str(steps), "--delta",
                    repr(delta))
    eps, order = reference_epsilon(q, sigma, steps, delta)
    diff = relative_difference(ours["epsilon"], eps)
    worst_epsilon = max(worst_epsilon, diff)
    count += 1
    line = (f"epsilon q={q:<8g} sigma={sigma:<5g} steps={steps:<7d} "
            f"delta={delta:<6g} ours={ours['epsilon']:.12g} "
            f"(order {ours['order']:g})  dp-accounting={eps:.12g} "
            f"(order {order:g})  rel diff {diff:.2e}")
    print(line)
    if not diff <= EPSILON_TOLERANCE:
      failures.append(line)

  worst_sigma = 0.0
  for target, delta, q, steps in CALIBRATION_CASES:
    ours = run_tool(tool, "sigma", "--accountant", "rdp", "--q", repr(q),
                    "--epsilon", repr(target), "--steps", str(steps),
                    "--delta", repr(delta))
    sigma = reference_sigma(target, delta, q, steps, ours["sigma"])
    diff = relative_difference(ours["sigma"], sigma)
    worst_sigma = max(worst_sigma, diff)
    # Our sigma must meet the target by the reference accountant too.
    reached, _ = reference_epsilon(q, ours["sigma"], steps, delta)
    line = (f"sigma   target epsilon={target:<5g} delta={delta:<6g} "
            f"q={q:<8g} steps={steps:<7d} ours={ours['sigma']:.10g}  "
            f"dp-accounting={sigma:.10g}  rel diff {diff:.2e}  "
            f"dp-accounting epsilon at ours {reached:.10g}")
    print(line)
    if not diff <= SIGMA_TOLERANCE or reached > target * (1 + 1e-12):
      failures.append(line)

  print(f"{count} epsilon cases: max relative difference {worst_epsilon:.3e}"
        f" (tolerance {EPSILON_TOLERANCE:g})")
  print(f"{len(CALIBRATION_CASES)} calibrations: max relative sigma difference"
        f" {worst_sigma:.3e} (tolerance {SIGMA_TOLERANCE:g})")
  if failures:
    print("FAILED:")
    for line in failures:
      print("  " + line)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
