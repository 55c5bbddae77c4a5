// What the NCCL lessons (04 threads/group in one process, 05 one process per GPU) share apart from the
// combine itself: their common flags, one GPU's share of the shots, the single-GPU reference they are
// checked against, and the check and report at the end. The combine (the NCCL calls) stays in each
// lesson's main file.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "cli.hpp"
#include "device.hpp"
#include "gpu_propagator.hpp"
#include "problem.hpp"
#include "shot_split.hpp"

namespace fwi {

struct ShotParallelOptions {
    int iterations = 3;
    bool no_reference = false;
    double timeout_s = 60.0;
    bool verbose = false;
    std::string json;
};

// --iterations, --no-reference, --timeout, --verbose, --json
void add_shot_parallel_flags(ArgParser& parser, ShotParallelOptions& options);

// Every part's shots, in order (split_shots for parts 0..parts-1): throws UsageError when a part would
// get no shot, before any GPU is touched.
std::vector<ShotRange> split_all_shots(int nshots, int parts);

// One GPU's part of the inversion, on the device current when it is built (use it only with that
// device current): its shots, a propagator that holds the observed traces of those shots (modelled in
// the true model) and this GPU's copy of the model, and the device buffers the combine works on.
// Building it runs one untimed gradient (the warm-up that captures the CUDA graphs).
class GpuShare {
public:
    GpuShare(const Problem& problem, const ShotRange& shots);
    ~GpuShare();
    GpuShare(const GpuShare&) = delete;
    GpuShare& operator=(const GpuShare&) = delete;

    // The gradient and misfit of this GPU's shots (the propagator returns them on the host; they are
    // copied into gradient() and misfit() on stream(), ready for an in-place allreduce there).
    void compute_and_stage();
    // Copies gradient() and misfit() back (waits for stream()).
    void download_combined(std::vector<float>& gradient, double& misfit) const;
    // update_model with the combined gradient; the same on every GPU, so every model stays identical.
    void update(const std::vector<float>& combined_gradient);

    const std::vector<int>& shots() const { return shots_; }
    const std::vector<float>& velocity() const { return velocity_; }
    GpuPropagator& propagator() { return propagator_; }
    float* gradient() const { return gradient_.data(); }
    double* misfit() const { return misfit_.data(); }
    size_t gradient_count() const { return gradient_.size(); }
    cudaStream_t stream() const { return stream_; }

private:
    Problem problem_;
    std::vector<int> shots_;
    GpuPropagator propagator_;
    std::vector<float> velocity_;
    DeviceBuffer<float> gradient_;
    DeviceBuffer<double> misfit_;
    cudaStream_t stream_ = nullptr;
};

// The single-GPU reference: every shot on the current device, the same iterations, timed the same way
// (host wall time of each gradient after the warm-up).
struct ReferenceRun {
    std::vector<float> first_gradient;  // from the initial model
    double first_misfit = 0.0;
    std::vector<float> final_model;
    std::vector<double> gradient_seconds, iteration_seconds;
};
ReferenceRun run_reference(const Problem& problem, int iterations);

// What a multi-GPU run measured. Times per iteration: gradient = from "start local gradients" to
// "combined gradient on the host of every GPU", combine = the part of it after the last GPU finished
// its local gradient, iteration = the gradient plus the model update.
struct ShotParallelRun {
    std::string pattern, variant;
    int gpus = 1, ranks = 1;
    std::vector<float> first_gradient;  // combined, from the initial model
    double first_misfit = 0.0;
    std::vector<float> final_model;     // GPU 0's (rank 0's)
    bool models_identical = true;       // every GPU ended with the same model, bit for bit
    std::vector<double> gradient_seconds, combine_seconds, iteration_seconds;
};

// "iteration   2/3  misfit 1.234567e+02  gradient  19.52 ms (combine 0.21 ms)  iteration  19.80 ms  ETA 0.0 s"
void print_iteration(int iteration, int iterations, double misfit, double gradient_s, double combine_s,
                     double iteration_s);

// Compares with the reference (when there is one), prints the speedup line and the RESULT line, and
// throws VerificationError when the gradient or final model differ beyond the tolerances or the GPUs'
// models differ from each other.
void verify_and_report(const Problem& problem, const ShotParallelRun& run, const ReferenceRun* reference,
                       const std::string& json_path);

}  // namespace fwi
