#!/usr/bin/env python3
"""PNG pictures of an FWI run's --out folder (06_fwi_shot_parallel writes it; 01_single_gpu's works too).

usage: python3 plot_fwi.py DIR

Reads the .npy models and gradients and loss_history.json that are there and writes, into DIR:
  models.png     true, initial and final model, and the change the inversion made (final - initial)
  snapshots.png  the models saved every --save-every iterations (model_iter_NNNN.npy)
  gradients.png  the first and the final gradient
  loss.png       the misfit relative to the first iteration's
Pictures whose inputs are missing are left out. Without matplotlib it says so and makes none (exit 0):
the run's numbers are all in the .npy, .csv and .json files anyway. A damaged input file (not a 2-D
array, a loss history that is not the run's JSON) is named, and the exit code is 2.
"""
import glob
import json
import math
import os
import re
import sys

# plotting.py: in the source tree in scripts/, in an install (cmake --install) beside this file.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "scripts")]
from plotting import MISSING_HINT, import_matplotlib, print_help, replace_atomically  # noqa: E402


class BadRunFile(Exception):
    """A file of the run folder that cannot be what the run wrote."""


def load_model(np, path):
    """A 2-D array from a .npy file; BadRunFile naming the file when it is not one."""
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, MemoryError) as error:  # MemoryError: a header with a huge shape
        raise BadRunFile("%s is not a NumPy array file (%s)" % (path, error))
    if array.ndim != 2 or array.size == 0 or array.dtype.kind not in "iuf":  # real numbers, not complex or times
        raise BadRunFile("%s holds a %s array of shape %s, not a model of nz x nx numbers"
                         % (path, array.dtype, array.shape))
    if not np.isfinite(array).all():  # the run refuses such a model, so this file is not what it wrote
        raise BadRunFile("%s holds values that are not finite numbers (NaN or infinity)" % path)
    return array


def load(np, directory, name):
    path = os.path.join(directory, name)
    return load_model(np, path) if os.path.isfile(path) else None  # not a FIFO, which would block the read


def model_panel(fig, ax, image, title, vmin, vmax, cmap="viridis", label="m/s"):
    shown = ax.imshow(image, cmap=cmap, vmin=vmin, vmax=vmax, aspect="equal")
    ax.set_title(title)
    ax.set_xlabel("x (cells)")
    ax.set_ylabel("z (cells)")
    fig.colorbar(shown, ax=ax, shrink=0.8, label=label)


def symmetric_limit(np, array):
    """A colour range that shows the body of the array, not its few largest values (the sources)."""
    limit = float(np.percentile(np.abs(array), 99.5))
    return limit if limit > 0 else 1.0


def plot_models(np, plt, directory, written):
    true, initial, final = (load(np, directory, n + ".npy") for n in ("true_model", "initial_model", "final_model"))
    panels = [(m, t) for m, t in ((true, "true model"), (initial, "initial model"), (final, "final model"))
              if m is not None]
    if not panels:
        return
    vmin = min(float(m.min()) for m, _ in panels)
    vmax = max(float(m.max()) for m, _ in panels)
    if final is not None and initial is not None and final.shape != initial.shape:
        raise BadRunFile("final_model.npy %s and initial_model.npy %s in %s differ in shape: files of two runs?"
                         % (final.shape, initial.shape, directory))
    change = final - initial if final is not None and initial is not None else None
    count = len(panels) + (change is not None)
    columns = 2 if count == 4 else count
    rows = (count + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 4 * rows), squeeze=False)
    for ax, (model, title) in zip(axes.flat, panels):
        model_panel(fig, ax, model, title, vmin, vmax)
    if change is not None:
        limit = symmetric_limit(np, change)
        model_panel(fig, axes.flat[count - 1], change, "change: final - initial", -limit, limit, "RdBu_r")
    save(fig, plt, directory, "models.png", written)


def plot_snapshots(np, plt, directory, written):
    # Only the run's own names, model_iter_ and the iteration's digits; other files are not the run's.
    snapshot = re.compile(r"model_iter_(\d+)\.npy$")
    paths = sorted(p for p in glob.glob(os.path.join(directory, "model_iter_*.npy"))
                   if snapshot.match(os.path.basename(p)))
    if not paths:
        return
    paths = paths[:: max(1, (len(paths) + 11) // 12)]  # at most 12 panels
    models = [load_model(np, p) for p in paths]
    vmin = min(float(m.min()) for m in models)
    vmax = max(float(m.max()) for m in models)
    columns = min(4, len(models))
    rows = (len(models) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 3.5 * rows), squeeze=False)
    for ax in axes.flat[len(models):]:
        ax.axis("off")
    for ax, path, model in zip(axes.flat, paths, models):
        iteration = int(snapshot.match(os.path.basename(path)).group(1))
        model_panel(fig, ax, model, "after iteration %d" % iteration, vmin, vmax)
    save(fig, plt, directory, "snapshots.png", written)


def plot_gradients(np, plt, directory, written):
    gradients = [(g, t) for g, t in ((load(np, directory, "first_gradient.npy"), "first gradient"),
                                     (load(np, directory, "final_gradient.npy"), "final gradient")) if g is not None]
    if not gradients:
        return
    fig, axes = plt.subplots(1, len(gradients), figsize=(5 * len(gradients), 4), squeeze=False)
    for ax, (gradient, title) in zip(axes[0], gradients):
        limit = symmetric_limit(np, gradient)
        model_panel(fig, ax, gradient, title, -limit, limit, "RdBu_r", "dJ/dv")
    save(fig, plt, directory, "gradients.png", written)


def plot_loss(plt, directory, written):
    path = os.path.join(directory, "loss_history.json")
    if not os.path.isfile(path):
        return
    try:
        with open(path) as f:
            history = json.load(f)
        iterations, misfits = history["iteration"], history["relative_misfit"]
        # What a run writes: whole iteration numbers, and misfits (sums of squares, over the first) of at least 0.
        def number(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
        if (not iterations or len(iterations) != len(misfits) or not all(number(v) for v in iterations + misfits)
                or not all(isinstance(v, int) for v in iterations) or min(misfits) < 0):
            raise ValueError("its iteration and relative_misfit lists are not two lists of one length, at least one "
                             "entry long, of whole iteration numbers and of misfits of at least 0")
    # OverflowError: an integer past a float; RecursionError: nested too deep for the parser.
    except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError) as error:
        raise BadRunFile("%s is not a run's loss history (%s: %s)" % (path, type(error).__name__, error))
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogy(iterations, misfits, marker="o")
    ax.set_xlabel("iteration")
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.set_ylabel("misfit / first misfit")
    ax.set_title("loss history")
    ax.grid(True, which="both", alpha=0.3)
    save(fig, plt, directory, "loss.png", written)


def save(fig, plt, directory, name, written):
    fig.tight_layout()
    replace_atomically(os.path.join(directory, name), lambda temporary: fig.savefig(temporary, dpi=100, format="png"))
    plt.close(fig)
    written.append(name)


def main(argv):
    if argv[1:] in (["-h"], ["--help"]):
        return print_help("plot_fwi.py", __doc__)
    if len(argv) == 2 and not os.path.isdir(argv[1]):
        print("plot_fwi.py: no such folder: %s" % argv[1], file=sys.stderr)
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: python3 plot_fwi.py DIR   (DIR: the --out folder of an FWI run)", file=sys.stderr)
        return 2
    directory = argv[1]
    np, plt = import_matplotlib()
    if plt is None:
        print("plot_fwi.py: warning: matplotlib is not installed for python3, so no PNG pictures were made (%s); "
              "the arrays are in %s" % (MISSING_HINT, directory), file=sys.stderr)
        return 0
    written = []
    try:
        plot_models(np, plt, directory, written)
        plot_snapshots(np, plt, directory, written)
        plot_gradients(np, plt, directory, written)
        plot_loss(plt, directory, written)
    except BadRunFile as error:
        print("plot_fwi.py: error: %s" % error, file=sys.stderr)
        return 2
    except OSError as error:  # a picture that cannot be written (a folder in its place, a full disk)
        print("plot_fwi.py: error: cannot write a picture in %s: %s" % (directory, error), file=sys.stderr)
        return 2
    print("pictures: %s in %s/" % (", ".join(written) if written else "none (no inputs found)", directory))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
