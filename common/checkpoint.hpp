// Checkpoints of an FWI run: the model, the iterations done and the loss history, in one file written
// atomically (write_file_atomically, output.hpp: a temporary file, fsync, rename over the old one, fsync
// of the folder), so a run killed at any moment leaves the previous checkpoint or the new one, never a
// torn file. The model update (common/update.hpp) keeps no state between iterations: model and iteration
// count are all a resumed run needs to continue exactly as the uninterrupted run would have.
#pragma once

#include <string>
#include <vector>

#include "problem.hpp"

namespace fwi {

// Where an FWI run stands after `iterations_done` iterations.
struct FwiState {
    int iterations_done = 0;
    std::vector<float> velocity;            // nz x nx, after iterations_done updates
    std::vector<double> misfits;            // one per iteration done
    std::vector<double> iteration_seconds;  // one per iteration done
};

struct Checkpoint {
    FwiState state;
    std::string problem_text;  // problem_fingerprint() of the problem it belongs to
    int ranks = 0;             // how many ranks the run that wrote it had
};

// The checkpoint in DIR: DIR/checkpoint.fwi.
constexpr const char* kCheckpointFileName = "checkpoint.fwi";
std::string checkpoint_path(const std::string& dir);

// Every value of the problem, one "name value" line each, in a fixed order: two runs with equal
// fingerprints model the same data and apply the same update.
std::string problem_fingerprint(const Problem& problem);

// The file's bytes: a magic word, the fields, and a checksum of all of them (little-endian, as on every
// machine this suite targets). decode_checkpoint throws UsageError naming --resume and `source` when the
// bytes are not a whole, uncorrupted checkpoint.
std::string encode_checkpoint(const Checkpoint& checkpoint);
Checkpoint decode_checkpoint(const std::string& bytes, const std::string& source);

// Writes DIR/checkpoint.fwi atomically (DIR must exist). Throws EnvironmentError naming the path.
void write_checkpoint(const std::string& dir, const Checkpoint& checkpoint);
// The most bytes a checkpoint of `problem` may have: its model, a loss history of at most kMaxIterations
// entries and the problem's text (with room to spare for another problem's, whose differences check_resume
// lists). Not sized by the run's --iterations: a checkpoint that holds more iterations than the run asks
// for is whole, and check_resume says so.
size_t largest_checkpoint_bytes(const Problem& problem);
// Reads DIR/checkpoint.fwi. Throws UsageError naming --resume when it is missing or damaged, or larger
// than `max_bytes` (checked before it is read: a file of any size could be given).
Checkpoint read_checkpoint(const std::string& dir, size_t max_bytes);

// Whether a run of `problem` for `iterations` iterations on `ranks` ranks can continue from `checkpoint`:
// throws UsageError when the problem differs (naming the values that differ) or the checkpoint already
// holds `iterations` iterations or more. Returns a warning ("" if none) when the rank count differs: the
// run continues correctly, but the sums are taken in another order, so the result is not bit-identical.
// `path` is the checkpoint's file, for the messages; its model must be one a run can continue from
// (model_checks.hpp).
std::string check_resume(const Checkpoint& checkpoint, const std::string& path, const Problem& problem, int iterations,
                         int ranks);

}  // namespace fwi
