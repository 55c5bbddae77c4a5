// The files an FWI run leaves in its --out folder (written by rank 0): models as .npy, the loss history
// as CSV and JSON, and PNG pictures of them drawn by plot_fwi.py.
#pragma once

#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "problem.hpp"

namespace fwi {

// "model_iter_0005.npy": the model after that many iterations.
std::string snapshot_file_name(int iteration);

// What a run writes into (or removes from) its --out folder DIR: the checkpoint, the models, the gradients,
// the loss history, and the snapshots already there, which it replaces or removes. Not the pictures: a
// picture that cannot be drawn is a warning (draw_pictures).
std::vector<std::string> run_file_names(const std::string& dir);

// Removes DIR's snapshots (model_iter_NNNN.npy) of iterations after `iteration`: those of an earlier run into
// the same folder, or of a killed run past the checkpoint this one resumes, which the pictures would show
// beside this run's. Other files are left alone. Throws EnvironmentError when one cannot be removed.
void remove_snapshots_after(const std::string& dir, int iteration);

// DIR/loss_history.csv (iteration,misfit,relative_misfit,iteration_seconds) and DIR/loss_history.json
// ({"iteration": [...], "misfit": [...], "relative_misfit": [...], "iteration_seconds": [...]}).
void write_loss_history(const std::string& dir, const FwiState& state);

// Runs `python3 SCRIPT DIR` and waits for it, at most `timeout_s` seconds (then it is stopped). Returns
// false, with a warning on stderr that says how to make the pictures by hand, when it cannot be started,
// fails or runs out of time; a missing matplotlib is the script's own warning and not a failure.
constexpr double kPicturesTimeoutSeconds = 600;  // far more than the lessons' grids need
bool draw_pictures(const std::string& script, const std::string& dir, double timeout_s);

// plot_fwi.py where it is: beside an installed program (PREFIX/share/multi_gpu_fwi/, from PREFIX/bin/),
// else in the source tree the program was built from.
std::string plot_script_path();

}  // namespace fwi
