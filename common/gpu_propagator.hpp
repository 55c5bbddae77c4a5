// The GPU propagator: the discrete operators of common/stencil.hpp, batched over shots (the shots of a
// batch advance in the same kernel launches, one grid z-slice per shot). Each time step is two kernels
// run side by side, one for the interior and one for the absorbing border, with source injection,
// receiver sampling and the imaging condition fused into them; each time loop is replayed as a CUDA
// graph, its shots split into independent chains of launches (see begin_chains), and where its kernels
// were compiled for compute capability 9.0 or later its steps are joined by programmatic edges, so that a
// step's kernels are launched while the previous step's still run.
//
// Memory: the gradient keeps, for every forward step, the Laplacian terms the imaging condition needs
// (one stored field per step and shot, plus the absorbing layer's frame), so the adjoint pass neither
// recomputes the forward nor applies a second stencil. The forward pass runs as many shots at a time as
// fit in free device memory and keep a time step's working set within the L2 cache; the adjoint pass,
// whose working set is larger, then works through them in smaller groups. A problem of which not even
// one shot fits is refused with an EnvironmentError (exit 3) before anything runs.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_resources.hpp"
#include "medium.hpp"
#include "problem.hpp"

namespace fwi {

struct StepConstants;  // kernel arguments, defined in gpu_kernels.cuh
struct InnerRegion;

// What gradient() returns on the host. The gradient itself stays in device memory (device_gradient()).
struct GradientResult {
    double misfit = 0.0;           // 0.5 sum (syn - obs)^2 over the shots
    double device_seconds = 0.0;   // CUDA events around the whole computation
    double forward_seconds = 0.0;  // of which the forward time loops
    double adjoint_seconds = 0.0;  // and the adjoint time loops
};

class GpuPropagator {
public:
    // Works on the current CUDA device. `velocity` is the model to start with.
    GpuPropagator(const Problem& problem, const std::vector<float>& velocity);
    ~GpuPropagator();
    GpuPropagator(const GpuPropagator&) = delete;
    GpuPropagator& operator=(const GpuPropagator&) = delete;

    void set_velocity(const std::vector<float>& velocity);
    // The model in device memory, nz x nx. Whoever changes it there (the model update) calls
    // velocity_changed() afterwards, on stream() or after it, so the derived fields follow.
    float* device_velocity() const { return velocity_.data(); }
    void velocity_changed();
    std::vector<float> download_velocity() const;
    // Observed traces of every shot, [nshots][nt][nrec].
    void set_observed(const std::vector<float>& traces);

    // Receiver traces of `shots` with the current model: [shots.size()][nt][nrec].
    std::vector<float> forward(const std::vector<int>& shots);
    // Device time of the time loops of the last forward() call (CUDA events around the graph launches).
    double last_forward_loop_seconds() const { return last_forward_loop_seconds_; }
    // Misfit and gradient over `shots` against the observed traces. The gradient is left in
    // device_gradient(), complete when this returns; it is never copied to the host here. Where other
    // processes took device memory since the batch sizes were chosen, it lowers them for good and says
    // so in a note on stderr.
    GradientResult gradient(const std::vector<int>& shots);
    // dJ/dv of the last gradient() call, nz x nx floats on this device.
    float* device_gradient() const { return gradient_.data(); }
    // A host copy of it, for verification and output.
    std::vector<float> download_gradient() const;
    // The stream every kernel of this propagator runs on (a non-blocking stream of the current device).
    cudaStream_t stream() const { return stream_.get(); }
    // Waits, with the limit of a short piece of GPU work (finish_within), for everything queued on stream();
    // `what` names it where the limit passes.
    void finish(const std::string& what) const;

    // Device memory one shot of a gradient batch needs, and the batch sizes chosen: the forward pass runs
    // up to gradient_batch_size() shots at a time and keeps their history, and the adjoint pass works
    // through them adjoint_group_size() at a time (a call with fewer shots: groups of at most that many,
    // spread evenly over them).
    size_t gradient_bytes_per_shot() const;
    int gradient_batch_size() const { return gradient_batch_; }
    int adjoint_group_size() const;
    // Sets the batch sizes in place of those chosen from the L2 cache, within what device memory allows:
    // up to gradient_batch shots at a time in the forward pass, up to adjoint_group of them in each
    // adjoint group (for tests and experiments, on any GPU's cache).
    void set_batch_sizes(int gradient_batch, int adjoint_group);
    // Throws DeviceMemoryError (an EnvironmentError: exit 3), naming the memory needed, when not even one
    // shot fits.
    void require_gradient_fits() const;
    // The most device memory this propagator has held.
    size_t peak_allocated_bytes() const { return peak_allocated_bytes_; }
    // "gradient needs 2.16 GiB per shot (the imaging terms of every step are kept): 8 shots, forward 8 and
    // adjoint 4 at a time; 61.3 of 79.2 GiB free"
    std::string memory_report() const;

    const FieldLayout& layout() const { return layout_; }

    // The receiver traces of `shots` with the current model, placed in an all-shots array
    // [nshots][nt][nrec] with the other shots' traces zero: the observed data of a GPU or rank that works
    // on `shots` only (as if it had read just its share of the data), ready for set_observed. Call it
    // while the propagator holds the true model.
    std::vector<float> observed_traces_of(const std::vector<int>& shots);

private:
    enum class Mode { forward_only, gradient };
    enum class Pass { forward, adjoint };  // which pass a time step belongs to
    struct Workspace;                      // wavefields and traces for up to `capacity` shots in one mode
    // A time loop splits its shots into up to kMaxChains chains of launches (see begin_chains). One chain:
    // the inner kernels on `main`, the border kernels on `side`.
    static constexpr int kMaxChains = 4;
    struct Chain {
        explicit Chain(int device) : main(device), side(device), fork(device), join(device), done(device) {}
        CudaStream main, side;
        CudaEvent fork, join, done;
    };

    void ensure_workspace(Mode mode, int batch, int adjoint_group);
    std::pair<int, int> ensure_gradient_workspace(int shots);  // the batch and adjoint group sizes it fits
    cudaGraphExec_t time_loop_graph(Mode mode, int batch, int adjoint_first = 0, int adjoint_count = 0);
    void capture_forward(Mode mode, int batch);
    void capture_adjoint(int batch, int first, int count);
    InnerRegion step_region(Pass pass) const;
    StepConstants step_constants(Pass pass) const;
    // One step of a chain of `batch` shots: the inner kernel (whose threads update `cell_rows` rows of cells
    // each) beside the border kernel.
    template <typename Step>
    void launch_step(const Chain& chain, const InnerRegion& inner, int batch, int cell_rows,
                     void (*inner_kernel)(StepConstants, Step, InnerRegion),
                     void (*border_kernel)(StepConstants, Step, InnerRegion, int), const StepConstants& k,
                     const Step& a);
    int begin_chains(int shots, Pass pass);
    void end_chains(int chains);
    void start_batch(const std::vector<int>& shots, size_t first, int batch);
    void start_adjoint();
    size_t fixed_bytes() const;     // model, geometry and observed traces
    size_t observed_bytes() const;  // the observed traces of every shot, allocated or not
    void require_observed_fits();
    void release_workspace();           // the workspace and the graphs captured on it
    void count_workspace();             // allocated_bytes_ (and its peak) after the workspace changed
    int shots_that_fit_memory() const;  // gradient shots the free device memory holds at once
    void choose_batches();
    // The cell updates of `passes` time loops over `shots` shots, for the limit of a wait on them.
    double cell_updates(size_t shots, int passes) const {
        return double(layout_.padded_cells()) * problem_.nt * double(shots) * passes;
    }

    Problem problem_;
    FieldLayout layout_;
    Acquisition acquisition_;
    CudaStream stream_{current_device()};
    std::vector<Chain> chains_;  // kMaxChains of them
    CudaEvent loop_start_{current_device()};
    int gradient_batch_ = 0, adjoint_most_ = 0;
    bool programmatic_steps_ = false;  // join the steps by programmatic edges (kernels built for >= 9.0)
    int forward_inner_places_ = 0;     // blocks of the 2-row forward inner kernel resident at once
    double last_forward_loop_seconds_ = 0.0;
    size_t allocated_bytes_ = 0, peak_allocated_bytes_ = 0;

    DeviceBuffer<float> velocity_, gradient_, observed_;
    // (v dt / dh)^2 on the padded grid, for the adjoint; the forward pass's copy is stored kForwardShift
    // floats further on, as its fields are (see kForwardShift).
    DeviceBuffer<float> courant_, forward_courant_;
    DeviceBuffer<PmlAxis<float>> rows_, columns_;
    DeviceBuffer<int> receiver_of_col_;
    DeviceBuffer<int2> forward_border_, adjoint_border_;  // the border cells of each kind of step
    std::unique_ptr<Workspace> workspace_;
    // (mode, batch, adjoint_first, adjoint_count) -> graph
    std::map<std::tuple<Mode, int, int, int>, CudaGraphExec> graphs_;
};

}  // namespace fwi
