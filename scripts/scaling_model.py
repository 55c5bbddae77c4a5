"""The comparison's scaling model: what one gradient on N GPUs should take, from measurements that do not
need the N-GPU run.

    predicted gradient(N) = compute(m) + combine(G, N)
        S            shots of the problem, split over N GPUs as split_shots does (common/shot_split.cpp):
        m = ceil(S/N)  the largest share, which every other GPU waits for
        compute(m)   01_single_gpu's compute phase with m shots on one GPU (01 --nshots m). Not S/N times
                     compute(S): fewer shots per launch keep the GPU less busy (the batch efficiency)
        combine(G,N) alpha + G / beta, from the pattern's own allreduce sweep on N GPUs (02, 03 or 05,
                     whichever runs the same combine of the gradient: COMBINE_SWEEP; compare.sh times each
                     of its allreduces alone, --isolated, as a run times its combine; 03's combine also sums
                     the 8-byte misfit with an MPI_Allreduce of its own and copies it to and from the GPU,
                     0.02-0.08 ms that its sweep leaves out, where NCCL's combine sums the misfit in the
                     gradient's group): the line through the sweep's two sizes
                     that bracket G, the gradient's bytes (G itself and 2G: compare.sh's sweeps include G, so
                     the model takes the sweep's time at G, and below the sweep's smallest size at least that
                     size's time; alpha and beta say how it splits into a start-up
                     time and a bandwidth there). Not one line fitted to all sizes: MPI libraries switch
                     algorithms between sizes (Open MPI's host allreduce runs at 1.5 GB/s to 16 MiB and at
                     0.9 GB/s from 64 MiB on 2 x H200), which no single alpha and beta describe
    predicted iteration(N) = predicted gradient(N) + update, 01's update phase (every GPU updates the whole
                     model, so it does not shrink with N)
    predicted speedup = 01's gradient / predicted gradient(N)

Against the ideal, 01's compute phase / N (its gradient but for a few microseconds of wait), the prediction
loses three things, which add up to the difference:
    batch efficiency  b * (compute(m)/m - compute(S)/S), b = S/N: the per-shot cost of smaller batches
    imbalance         (m - b) * compute(m)/m: what the largest share's extra shots cost at its rate per shot,
                      the part of the wait of the GPUs with fewer shots that is not batch efficiency
    combine           combine(G, N)
The largest of them is the row's biggest loss. Nothing here reads a GPU; compare.py feeds it the RESULT
files of one comparison (docs/RESULT.md).
"""
import math

# Which sweep measures each pattern's combine: (pattern, variant) -> (sweep program, sweep variant).
# 04 sums with ncclAllReduce inside one process, as 02's nccl variant does; 06 uses NCCL over MPI as 05.
COMBINE_SWEEP = {
    ("03_host_staged_mpi", "pageable"): ("03_host_staged_mpi", "pageable"),
    ("03_host_staged_mpi", "pinned"): ("03_host_staged_mpi", "pinned"),
    ("03_host_staged_mpi", "pipelined"): ("03_host_staged_mpi", "pipelined"),
    ("04_nccl_threads", "threads"): ("02_allreduce_primitives", "nccl"),
    ("04_nccl_threads", "group"): ("02_allreduce_primitives", "nccl"),
    ("05_nccl_mpi", ""): ("05_nccl_mpi", "nccl"),
    ("06_fwi_shot_parallel", ""): ("05_nccl_mpi", "nccl"),
}


# 02 takes at most 8 GPUs (its hand-rolled kernels hold a pointer per GPU), so compare.sh sweeps it only up to
# 8; beyond, 04's combine is taken from 05's sweep: NCCL's allreduce of the same bytes, over one process per GPU.
ALLREDUCE_PRIMITIVES_MOST_GPUS = 8


def combine_sweep_for(pattern, variant, gpus):
    """(sweep program, sweep variant) that measures this row's combine, None for a pattern without one."""
    source = COMBINE_SWEEP.get((pattern, variant))
    if source is not None and source[0] == "02_allreduce_primitives" and gpus > ALLREDUCE_PRIMITIVES_MOST_GPUS:
        return COMBINE_SWEEP[("05_nccl_mpi", "")]
    return source


def sweep_key(sweep_result):
    """(program, variant) of an allreduce_sweep RESULT, as COMBINE_SWEEP names it ("pipelined 1024KiB x1" is
    "pipelined")."""
    return sweep_result["pattern"], sweep_result["variant"].split(" ")[0]


def largest_share(shots, gpus):
    return -(-shots // gpus)


def line_through(first, second):
    """alpha (s) and beta (bytes/s) of time = alpha + bytes / beta through two (bytes, seconds) points.
    alpha comes out negative where the time grows faster than linearly between them. Where it does not
    grow at all (a latency-bound size, or noise), the line is flat at the first point's time: alpha is that
    time and beta infinite."""
    (n1, t1), (n2, t2) = first, second
    if n1 == n2:
        raise ValueError("an alpha-beta line needs two different sizes, got %d twice" % n1)
    slope = (t2 - t1) / (n2 - n1)
    if slope <= 0:
        return t1, math.inf
    return t1 - slope * n1, 1.0 / slope


def combine_time(alpha, beta, nbytes):
    return alpha + nbytes / beta


def combine_from_sweep(sweep_result, gradient_bytes):
    """The model's combine of a G-byte gradient from one allreduce sweep: a dict with alpha_s, beta_Bps and
    predicted_s, the time at G on the line through the two sizes bracketing G (G and the next size when the
    sweep has G; the two nearest sizes on one side when G lies outside the sweep). Below the sweep's smallest
    size, never less than that size's time: the line, taken further down, can fall below zero, and an
    allreduce that small takes about the latency anyway."""
    points = sorted((row["bytes"], row["time_s"]) for row in sweep_result["sizes"])
    if len(points) < 2:
        raise ValueError("the sweep has %d size(s); the model needs two" % len(points))
    above = next((k for k, (n, _) in enumerate(points) if n > gradient_bytes), len(points) - 1)
    above = max(above, 1)
    alpha, beta = line_through(points[above - 1], points[above])
    predicted = combine_time(alpha, beta, gradient_bytes)
    if gradient_bytes < points[0][0]:
        predicted = max(predicted, points[0][1])
    return {"alpha_s": alpha, "beta_Bps": beta, "predicted_s": predicted,
            "sizes": (points[above - 1][0], points[above][0])}


def predict(shots, gpus, compute_of_shots, combine_s, update_s):
    """The model's figures for one row. compute_of_shots: {shots on one GPU: compute seconds}, holding the
    problem's S and ceil(S/gpus). Returns a dict of seconds: compute, combine, gradient, iteration, ideal
    (01's compute phase / N: compute(S) / N), and losses {batch efficiency, imbalance, combine}, which add up
    to gradient - ideal."""
    m = largest_share(shots, gpus)
    balanced = shots / gpus
    compute_all, compute_share = compute_of_shots[shots], compute_of_shots[m]
    gradient = compute_share + combine_s
    losses = {
        "batch efficiency": balanced * (compute_share / m - compute_all / shots),
        "imbalance": (m - balanced) * compute_share / m,
        "combine": combine_s,
    }
    return {"largest_share": m, "compute": compute_share, "combine": combine_s, "gradient": gradient,
            "iteration": gradient + update_s, "ideal": compute_all / gpus, "losses": losses}


def biggest_loss(losses):
    """(name, seconds) of the largest loss."""
    return max(losses.items(), key=lambda item: item[1])


if __name__ == "__main__":  # a module of compare.py: run alone, it says what it computes
    import sys

    if sys.argv[1:] not in ([], ["-h"], ["--help"]):
        print("scaling_model: a module of scripts/compare.py; it takes no arguments (--help prints what it models)",
              file=sys.stderr)
        sys.exit(2)
    from plotting import print_help  # run as a script: scripts/ is on the path

    sys.exit(print_help("scaling_model", __doc__))
