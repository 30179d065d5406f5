"""Compares dpc-privacy with Google's dp-accounting (the reference accountant).

Usage: compare_dp_accounting.py PATH/TO/dpc-privacy

RDP: for a grid of (q, sigma, steps, delta) it asks `dpc-privacy epsilon
--accountant rdp --json` and dp_accounting.rdp.RdpAccountant with
PoissonSampledDpEvent(q, GaussianDpEvent(sigma)) composed `steps` times for
epsilon; then for a set of targets it asks `dpc-privacy sigma --accountant rdp
--json` and dp_accounting's calibrate_dp_mechanism for the noise multiplier.

PLD: for cases spread over q in [1e-4, 0.1], sigma in [0.5, 5], steps in
[1, 1e5], delta in [1e-8, 1e-3] it asks `dpc-privacy epsilon` and `delta`
(the default accountant, pld) and dp_accounting's PLDAccountant on the loss
grid the tool reports; for calibrations it checks that the tool's sigma meets
the target by dp-accounting's PLD accountant and that 0.1 % less noise does
not. (test/unit/privacy checks a larger grid against a committed table of
dp-accounting values, without Python.)

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
from dp_accounting.pld import pld_privacy_accountant

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

# (q, sigma, steps, delta) for the PLD accountant: each q and sigma, steps
# and delta over their ranges, epsilon from ~0.01 to ~50.
PLD_CASES = [
    (1e-4, 0.5, 100000, 1e-8),
    (1e-4, 5.0, 1, 1e-5),
    (1e-3, 1.0, 100000, 1e-6),
    (1e-3, 2.0, 1000, 1e-3),
    (256 / 60000, 0.9, 2000, 1e-5),
    (0.01, 1.1, 10000, 1e-5),
    (0.01, 0.5, 100, 1e-8),
    (0.01, 5.0, 100000, 1e-3),
    (0.05, 2.0, 10, 1e-6),
    (0.1, 0.5, 1, 1e-5),
    (0.1, 1.0, 1000, 1e-3),
    (0.1, 5.0, 10000, 1e-8),
]

# (target epsilon, delta, q, steps) for PLD calibrations.
PLD_CALIBRATION_CASES = [
    (3.0, 1e-5, 0.01, 10000),
    (8.0, 1e-5, 256 / 60000, 2000),
    (1.0, 1e-6, 1e-3, 100000),
]

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


def reference_pld(q, sigma, steps, interval):
  accountant = pld_privacy_accountant.PLDAccountant(
      value_discretization_interval=interval)
  accountant.compose(
      dp_accounting.PoissonSampledDpEvent(q,
                                          dp_accounting.GaussianDpEvent(sigma)),
      steps)
  return accountant


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

  worst_pld_epsilon = 0.0
  worst_pld_delta = 0.0
  for q, sigma, steps, delta in PLD_CASES:
    flags = ["--q", repr(q), "--sigma", repr(sigma), "--steps", str(steps)]
    ours = run_tool(tool, "epsilon", *flags, "--delta", repr(delta))
    assert ours["accountant"] == "pld", ours
    reference = reference_pld(q, sigma, steps, ours["interval"])
    eps = reference.get_epsilon(delta)
    diff = relative_difference(ours["epsilon"], eps)
    worst_pld_epsilon = max(worst_pld_epsilon, diff)
    line = (f"pld     q={q:<8g} sigma={sigma:<5g} steps={steps:<7d} "
            f"delta={delta:<6g} ours={ours['epsilon']:.12g} "
            f"(grid {ours['interval']:g})  dp-accounting={eps:.12g}  "
            f"rel diff {diff:.2e}")
    print(line)
    # Within the tolerance, so in particular never more than it below.
    if not diff <= EPSILON_TOLERANCE:
      failures.append(line)
    # delta for half that epsilon (where there is one).
    probe = 0.5 * eps
    if probe == 0:
      continue
    ours_delta = run_tool(tool, "delta", *flags, "--epsilon", repr(probe))
    ref_delta = float(reference.get_delta(probe))
    diff = relative_difference(ours_delta["delta"], ref_delta)
    worst_pld_delta = max(worst_pld_delta, diff)
    line = (f"pld     delta at epsilon={probe:<10.4g} ours="
            f"{ours_delta['delta']:.12g}  dp-accounting={ref_delta:.12g}  "
            f"rel diff {diff:.2e}")
    print(line)
    if not diff <= EPSILON_TOLERANCE:
      failures.append(line)

  for target, delta, q, steps in PLD_CALIBRATION_CASES:
    flags = ["--q", repr(q), "--epsilon", repr(target), "--steps", str(steps),
             "--delta", repr(delta)]
    ours = run_tool(tool, "sigma", *flags)
    rdp = run_tool(tool, "sigma", "--accountant", "rdp", *flags)
    sigma = ours["sigma"]
    reached = reference_pld(q, sigma, steps,
                            ours["interval"]).get_epsilon(delta)
    below = reference_pld(q, sigma * (1 - 1e-3), steps,
                          ours["interval"]).get_epsilon(delta)
    line = (f"pld     sigma for epsilon={target:<5g} delta={delta:<6g} "
            f"q={q:<8g} steps={steps:<7d} ours={sigma:.10g} "
            f"(rdp {rdp['sigma']:.10g}, {sigma / rdp['sigma']:.3f}x)  "
            f"dp-accounting epsilon at ours {reached:.10g}, at 0.1 % less "
            f"noise {below:.10g}")
    print(line)
    if not (reached <= target * (1 + 1e-4) and below > target and
            sigma < rdp["sigma"]):
      failures.append(line)

  print(f"{count} epsilon cases: max relative difference {worst_epsilon:.3e}"
        f" (tolerance {EPSILON_TOLERANCE:g})")
  print(f"{len(CALIBRATION_CASES)} calibrations: max relative sigma difference"
        f" {worst_sigma:.3e} (tolerance {SIGMA_TOLERANCE:g})")
  print(f"{len(PLD_CASES)} pld cases: max relative difference "
        f"{worst_pld_epsilon:.3e} (epsilon), {worst_pld_delta:.3e} (delta); "
        f"{len(PLD_CALIBRATION_CASES)} pld calibrations")
  if failures:
    print("FAILED:")
    for line in failures:
      print("  " + line)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
