#!/usr/bin/env python3
"""CPU tests of the comparison's scaling model (scripts/scaling_model.py): its arithmetic on made-up
figures whose answers are worked out by hand, and its predictions on figures recorded on 2 x H200
(tests/data/scaling_model_2xH200.json), which must stay within 10% of what those runs measured.

usage: scaling_model_test.py PATH/TO/scripts PATH/TO/tests/data
"""
import json
import math
import os
import subprocess
import sys


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def close(a, b, relative=1e-12):
    return abs(a - b) <= relative * max(abs(a), abs(b))


def check_shares(model):
    # split_shots gives the first (S mod N) GPUs one shot more: the largest share is ceil(S/N).
    for shots, gpus, expected in ((8, 1, 8), (8, 2, 4), (8, 3, 3), (8, 4, 2), (8, 8, 1), (4, 3, 2), (32, 5, 7)):
        if model.largest_share(shots, gpus) != expected:
            fail("largest_share(%d, %d) = %d, expected %d" % (shots, gpus, model.largest_share(shots, gpus), expected))


def check_line(model):
    alpha, beta = model.line_through((1 << 20, 30e-6 + (1 << 20) / 250e9), (4 << 20, 30e-6 + (4 << 20) / 250e9))
    if not close(alpha, 30e-6, 1e-9) or not close(beta, 250e9, 1e-9):
        fail("the line through two points of 30 us + n / 250 GB/s gave alpha %g, beta %g" % (alpha, beta))
    try:
        model.line_through((64, 1.0), (64, 2.0))
        fail("a line through two points of one size must be refused")
    except ValueError:
        pass


def sweep(times):
    return {"pattern": "05_nccl_mpi", "variant": "nccl", "gpus": 2,
            "sizes": [{"bytes": n, "time_s": t} for n, t in times]}


def check_combine_from_sweep(model):
    # G measured: the model's combine is the sweep's own time at G, whatever the sizes around it do.
    kinked = sweep([(1000, 1e-5), (2000, 2e-5), (4000, 9e-5), (8000, 1.7e-4)])
    fit = model.combine_from_sweep(kinked, 4000)
    if not close(fit["predicted_s"], 9e-5) or fit["sizes"] != (4000, 8000):
        fail("combine at a measured size: %s, expected 9e-5 s through 4000 and 8000 B" % fit)
    if not close(fit["beta_Bps"], 4000 / 8e-5) or not close(fit["alpha_s"], 9e-5 - 4000 * 8e-5 / 4000):
        fail("alpha and beta of the line through 4000 and 8000 B: %s" % fit)
    # G between two sizes: on the line through them. G past the last size: the last two sizes.
    between = model.combine_from_sweep(kinked, 3000)["predicted_s"]
    if not close(between, 5.5e-5):
        fail("combine at 3000 B between 2000 (2e-5 s) and 4000 B (9e-5 s): %g, expected 5.5e-5" % between)
    beyond = model.combine_from_sweep(kinked, 16000)["predicted_s"]
    if not close(beyond, 1.7e-4 + 8000 * 8e-5 / 4000):
        fail("combine at 16000 B past the sweep: %g" % beyond)
    # G below the first size: the first two sizes (the sweep's smallest, not its ends), but never less than
    # the first size's time: the line falls to 5e-6 s at 500 B here, and below zero on a steeper sweep.
    below = model.combine_from_sweep(kinked, 500)
    if not close(below["predicted_s"], 1e-5) or below["sizes"] != (1000, 2000):
        fail("combine at 500 B below the sweep: %s, expected 1e-5 s (the first size's) through 1000 and 2000 B"
             % below)
    steep = model.combine_from_sweep(sweep([(1000, 1e-5), (2000, 3e-5)]), 400)["predicted_s"]
    if not close(steep, 1e-5):
        fail("combine at 400 B below a steep sweep (the line gives -2e-6 s): %g, expected 1e-5" % steep)
    try:
        model.combine_from_sweep(sweep([(4000, 1e-4)]), 4000)
        fail("a sweep of one size must be refused")
    except ValueError:
        pass


def check_predict(model):
    # 8 shots on 3 GPUs: shares 3, 3, 2. compute(8) = 80 ms, compute(3) = 32 ms (10.67 ms a shot against 10).
    compute = {8: 0.080, 3: 0.032}
    p = model.predict(8, 3, compute, combine_s=0.002, update_s=0.0005)
    expected = {"largest_share": 3, "compute": 0.032, "combine": 0.002, "gradient": 0.034, "iteration": 0.0345,
                "ideal": 0.080 / 3}
    for key, value in expected.items():
        if not close(p[key], value):
            fail("predict(8 shots, 3 GPUs)[%s] = %s, expected %s" % (key, p[key], value))
    losses = p["losses"]
    # batch: 8/3 shots at 10.67 instead of 10 ms (1.78 ms); imbalance: the 1/3 shot the largest share has above
    # the average 8/3 (3.56 ms); both beside the 2 ms combine.
    if not close(losses["batch efficiency"], 8 / 3 * (0.032 / 3 - 0.010)) or \
            not close(losses["imbalance"], (3 - 8 / 3) * 0.032 / 3):
        fail("losses of 8 shots on 3 GPUs: %s" % losses)
    if not close(sum(losses.values()), p["gradient"] - p["ideal"]):
        fail("the losses (%s) do not add up to predicted - ideal (%g)" % (losses, p["gradient"] - p["ideal"]))
    if model.biggest_loss(losses)[0] != "imbalance":
        fail("8 shots on 3 GPUs with a 2 ms combine: the biggest loss is %s, expected imbalance" % (
            model.biggest_loss(losses),))
    # One GPU: no batch or imbalance loss, the combine is all that is lost.
    one = model.predict(8, 1, compute, combine_s=0.001, update_s=0.0)
    if not close(one["gradient"], 0.081) or one["losses"]["batch efficiency"] != 0 or one["losses"]["imbalance"] != 0:
        fail("predict on one GPU: %s" % one)


def check_combine_sweeps(model):
    # 04's combine is 02's nccl sweep on up to 8 GPUs, which 02 takes at most; beyond, 05's (NCCL as well).
    if model.combine_sweep_for("04_nccl_threads", "group", 8) != ("02_allreduce_primitives", "nccl"):
        fail("04 on 8 GPUs: %s" % (model.combine_sweep_for("04_nccl_threads", "group", 8),))
    if model.combine_sweep_for("04_nccl_threads", "threads", 16) != ("05_nccl_mpi", "nccl"):
        fail("04 on 16 GPUs: %s" % (model.combine_sweep_for("04_nccl_threads", "threads", 16),))
    if model.combine_sweep_for("03_host_staged_mpi", "pinned", 16) != ("03_host_staged_mpi", "pinned"):
        fail("03 on 16 GPUs: %s" % (model.combine_sweep_for("03_host_staged_mpi", "pinned", 16),))
    if model.combine_sweep_for("01_single_gpu", "", 1) is not None:
        fail("01 has no combine sweep")


def check_recorded(model, data_dir):
    with open(os.path.join(data_dir, "scaling_model_2xH200.json")) as f:
        data = json.load(f)
    compute = {int(k): v for k, v in data["compute_of_shots_s"].items()}
    sweeps = {key: value for key, value in data["sweeps"].items()}
    if len(data["runs"]) < 4:
        fail("the recorded data holds %d runs, expected the 03 combines and 05" % len(data["runs"]))
    for name, run in data["runs"].items():
        pattern, _, variant = name.partition(" ")
        program, sweep_variant = model.COMBINE_SWEEP[(pattern, variant)]
        combine = model.combine_from_sweep(sweeps[program + " " + sweep_variant], data["gradient_bytes"])
        p = model.predict(data["shots"], run["gpus"], compute, combine["predicted_s"], data["update_s"])
        # By hand: one shot's compute plus the sweep's time at G (the sweep has G).
        at_g = next(s["time_s"] for s in sweeps[program + " " + sweep_variant]["sizes"]
                    if s["bytes"] == data["gradient_bytes"])
        if not close(p["gradient"], compute[1] + at_g, 1e-9):
            fail("%s: predicted %g s, expected compute(1) + the sweep at G = %g s" % (name, p["gradient"],
                                                                                     compute[1] + at_g))
        error = run["time_per_gradient_s"] / p["gradient"] - 1
        print("%-32s measured %8.2f ms, predicted %8.2f ms (%+.1f%%), biggest loss %s" % (
            name, 1e3 * run["time_per_gradient_s"], 1e3 * p["gradient"], 100 * error,
            model.biggest_loss(p["losses"])[0]))
        if abs(error) > 0.10:
            fail("%s: the model misses the recorded run by %+.0f%%" % (name, 100 * error))
        if name.startswith("03_host_staged_mpi") and model.biggest_loss(p["losses"])[0] != "combine":
            fail("%s: a host-staged combine of 64 MiB must be the biggest loss" % name)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    sys.path.insert(0, sys.argv[1])
    import scaling_model as model

    check_shares(model)
    check_line(model)
    check_combine_from_sweep(model)
    check_predict(model)
    check_combine_sweeps(model)
    check_recorded(model, sys.argv[2])
    if model.line_through((1, 1.0), (2, 1.0)) != (1.0, math.inf):
        fail("a flat line starts at the first point's time and has an infinite bandwidth")
    # A time that falls from G to 2G (noise in a latency-bound sweep) gives the sweep's time at G, not more.
    falling = model.combine_from_sweep(sweep([(4000, 1.2e-4), (8000, 0.9e-4)]), 4000)
    if falling["predicted_s"] != 1.2e-4 or not math.isinf(falling["beta_Bps"]):
        fail("a falling sweep: %s, expected 1.2e-4 s at G with an infinite beta" % falling)
    # Run alone, the module prints what it models for --help, and refuses anything else.
    script = os.path.join(sys.argv[1], "scaling_model.py")
    helped = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=60)
    if helped.returncode != 0 or "predicted gradient(N)" not in helped.stdout:
        fail("scaling_model.py --help: exit %d, printed %r" % (helped.returncode, helped.stdout + helped.stderr))
    if subprocess.run([sys.executable, script, "--bogus"], capture_output=True, timeout=60).returncode != 2:
        fail("scaling_model.py --bogus is not refused with exit 2")
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
