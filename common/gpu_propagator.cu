// The host side of the GPU propagator (gpu_propagator.hpp): the workspace and the batches it holds, the
// time loops captured as CUDA graphs from the kernels of gpu_kernels.cuh, and the forward and gradient
// passes that replay them.
#include "gpu_propagator.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "cuda_timing.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_kernels.cuh"
#include "nvtx.hpp"
#include "run_env.hpp"
#include "shot_split.hpp"
#include "stencil.hpp"

namespace fwi {

// Buffers for up to `capacity` shots in the forward pass and `adjoint_capacity` in the adjoint pass, laid
// out [slot][shot][field] so that one batch size's pointers are fixed and its time loops can be captured
// once as graphs. Every field has two slots (see kWaveSlots); gradient mode also keeps, for every step
// n < nt-1, what the imaging condition needs (h and gx), and the adjoint fields.
struct GpuPropagator::Workspace {
    Mode mode;
    int capacity, adjoint_capacity;
    DeviceBuffer<float> u, x, px, pz;
    DeviceBuffer<float> h, gx;                             // history, gradient mode only
    DeviceBuffer<float> zeta, delta, rho_x, rho_z, image;  // adjoint, gradient mode only
    DeviceBuffer<float> traces;                            // synthetic traces, then residuals
    DeviceBuffer<int> source_cell, shot_ids;
    // Gradient mode: the misfit of each batch, summed on the device (so that the host never waits between
    // the passes), and the scratch space of that sum.
    DeviceBuffer<double> misfits;
    DeviceBuffer<unsigned char> misfit_scratch;

    size_t bytes() const {
        size_t total = source_cell.bytes() + shot_ids.bytes() + misfits.bytes() + misfit_scratch.bytes();
        for (const DeviceBuffer<float>* b : {&u, &x, &px, &pz, &h, &gx, &zeta, &delta, &rho_x, &rho_z, &image, &traces})
            total += b->bytes();
        return total;
    }
};

namespace {
// Cells from the edge of the padded grid that the border kernels update: the forward's absorbing layer;
// the adjoint's also covers the layer's stencil reach (layer_coupling).
int border_margin(const FieldLayout& l, bool adjoint) {
    return adjoint && l.width > 0 ? l.width + kStencilRadius : l.width;
}

// The inner rectangle of a forward or an adjoint step.
InnerRegion pass_region(const FieldLayout& l, bool adjoint) {
    return InnerRegion::make(l, border_margin(l, adjoint), adjoint ? 0 : kForwardShift);
}

// The border cells of `r` in the order the border kernels take them: the rows above the inner rectangle,
// the rows below it, then the two sides of each row in between, so that neighbouring threads update
// neighbouring cells. A border thread reads its cell from this table (shared by the shots, and small)
// rather than work it out with two integer divisions: the border kernels are bound by instruction issue.
std::vector<int2> border_table(const FieldLayout& l, const InnerRegion& r) {
    std::vector<int2> cells;
    cells.reserve(r.border_cells(l));
    const auto add_cells = [&](int zp, int x_begin, int x_end) {
        for (int xp = x_begin; xp < x_end; ++xp) cells.push_back(make_int2(zp, xp));
    };
    for (int zp = 0; zp < r.z0; ++zp) add_cells(zp, 0, l.nx_padded);
    for (int zp = r.z1; zp < l.nz_padded; ++zp) add_cells(zp, 0, l.nx_padded);
    for (int zp = r.z0; zp < r.z1; ++zp) {
        add_cells(zp, 0, r.x0);
        add_cells(zp, r.x1, l.nx_padded);
    }
    return cells;
}

// The floats each buffer of a workspace holds, for `batch` shots in the forward pass and `adjoint_group`
// in each adjoint group (gradient mode; a forward-only workspace has no history and no adjoint fields).
// The one formula both for allocating a workspace and for the batches that fit memory.
struct WorkspaceFloats {
    size_t u = 0, x = 0, px = 0, pz = 0, traces = 0;              // forward fields, synthetic traces
    size_t h = 0, gx = 0;                                         // history
    size_t zeta = 0, delta = 0, rho_x = 0, rho_z = 0, image = 0;  // adjoint fields
    size_t total() const { return u + x + px + pz + traces + h + gx + zeta + delta + rho_x + rho_z + image; }
};

WorkspaceFloats workspace_floats(const Problem& p, const FieldLayout& l, bool gradient, int batch, int adjoint_group) {
    const size_t shots = size_t(batch), adjoint_shots = size_t(adjoint_group), history_steps = size_t(p.nt - 1);
    // The border kernels read the layer's fields before they know whether their cell is in the layer (at
    // index 0 off it), so these buffers hold at least one float even without a layer (width 0: validate()
    // refuses it, but a Problem built in code can have it).
    const auto layer_floats = [](size_t floats) { return std::max<size_t>(floats, 1); };
    WorkspaceFloats f;
    f.u = f.x = kWaveSlots * shots * l.cells + kForwardShift;
    f.px = layer_floats(2 * shots * l.x_band_cells());
    f.pz = layer_floats(2 * shots * l.z_band_cells());
    f.traces = shots * p.trace_samples();
    if (gradient) {
        f.h = history_steps * shots * l.cells;
        f.gx = layer_floats(history_steps * shots * l.frame_cells());
        f.zeta = f.delta = kWaveSlots * adjoint_shots * l.cells;
        f.rho_x = f.rho_z = 2 * adjoint_shots * l.cells;
        f.image = adjoint_shots * l.cells;
    }
    return f;
}

// Once a process: on a GPU that could join the steps by programmatic launch, a build or driver that cannot
// makes every gradient slower (51.6 against 44.0 ms on an H100: docs/PERFORMANCE.md, "A build for other
// GPUs"), which nothing but doctor would show. In 05 and 06 each rank says it for its own GPU, named by
// its rank in the message's prefix.
void warn_steps_without_programmatic_launch(const BuildCode& code) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
        print_warning(
            has_programmatic_wait(code)
                ? std::string("the propagator steps without programmatic launch, slower: the driver is older than "
                              "CUDA 12.3 and cannot make the graph's programmatic edges; update the driver")
                : "the propagator steps without programmatic launch, slower: this GPU runs the build's compute_" +
                      std::to_string(code.ptx_version) + " code (CUDA architectures " + build_cuda_architectures() +
                      "), which lacks the wait it needs; " + kRebuildForTheseGpus);
    });
}
}  // namespace

GpuPropagator::GpuPropagator(const Problem& problem, const std::vector<float>& velocity)
    : problem_(problem), layout_(make_layout(problem)), acquisition_(make_acquisition(problem, layout_)) {
    for (int c = 0; c < kMaxChains; ++c) chains_.emplace_back(current_device());
    velocity_ = DeviceBuffer<float>(problem.model_cells());
    gradient_ = DeviceBuffer<float>(problem.model_cells());
    courant_ = DeviceBuffer<float>(layout_.cells);
    forward_courant_ = DeviceBuffer<float>(layout_.cells + kForwardShift);
    for (const DeviceBuffer<float>* b : {&courant_, &forward_courant_})
        CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->bytes(), stream()));  // the halo stays zero
    rows_ = DeviceBuffer<PmlAxis<float>>(layout_.nz_padded);
    columns_ = DeviceBuffer<PmlAxis<float>>(layout_.nx_padded);
    rows_.upload(pml_profile_as<float>(problem, layout_.nz_padded), stream());
    columns_.upload(pml_profile_as<float>(problem, layout_.nx_padded), stream());
    receiver_of_col_ = DeviceBuffer<int>(layout_.nx_padded);
    receiver_of_col_.upload(acquisition_.receiver_of_col, stream());
    for (const Pass pass : {Pass::forward, Pass::adjoint}) {
        const InnerRegion region = pass_region(layout_, pass == Pass::adjoint);
        const std::vector<int2> table = border_table(layout_, region);
        DeviceBuffer<int2>& border = pass == Pass::adjoint ? adjoint_border_ : forward_border_;
        border = DeviceBuffer<int2>(table.size());
        border.upload(table, stream());
    }
    allocated_bytes_ = fixed_bytes();
    peak_allocated_bytes_ = allocated_bytes_;
    set_velocity(velocity);
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    // Programmatic edges are safe only where the kernels wait for the previous step, and that wait is in
    // their code only when it was compiled for compute capability 9.0 or newer. The GPU's own compute
    // capability does not say so: an H100 running a build for A100 alone (CUDAARCHS=80) compiles its
    // compute_80 PTX when the program loads, into kernels without the wait. Without them (or with a driver
    // older than CUDA 12.3, which cannot make them) the steps are joined by plain edges, and each kernel's
    // wait returns at once.
    const BuildCode code = build_code_for(device);
    programmatic_steps_ = has_programmatic_wait(code) && driver_makes_programmatic_edges();
    if (!programmatic_steps_ && code.binary_version >= 90) warn_steps_without_programmatic_launch(code);
    int sms = 0, blocks_per_sm = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, forward_inner_kernel<kForwardRows>,
                                                             kInnerThreadsX * kInnerThreadsY, 0));
    forward_inner_places_ = sms * blocks_per_sm;

    choose_batches();
}

namespace {
// Device memory a new workspace may take: what is free now, less a share and a fixed amount kept for the
// CUDA graphs and other users.
constexpr double kKeptFreeShare = 0.05, kKeptFreeMiB = 256.0;
double usable_free_bytes() {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return std::max(0.0, (1.0 - kKeptFreeShare) * double(free_bytes) - kKeptFreeMiB * 1024 * 1024);
}

// The share of the L2 cache that a step's working set may fill (see choose_batches).
constexpr double kL2ShareForSteps = 0.45;
}  // namespace

int GpuPropagator::shots_that_fit_memory() const {
    // The observed traces of every shot (set_observed) come out of the same memory, if not yet allocated.
    const double observed_to_come = double(observed_bytes()) - double(observed_.bytes());
    const double usable = usable_free_bytes() - std::max(0.0, observed_to_come);
    return static_cast<int>(std::max(0.0, usable / gradient_bytes_per_shot()));
}

// Two batch sizes: the forward pass keeps the history of `gradient_batch_` shots, and the adjoint pass
// works through them in groups of at most `adjoint_most_`, spread evenly over a call's batch (a call with
// fewer shots, a GPU's share, is grouped as the plan for that many shots would group it). Each is as many shots as keep
// one step's working set (the fields a step reads and writes again in the next one) within 45% of the L2 cache, because
// the step kernels are fastest when those fields stay in L2, and only about half of it holds them: data that SMs all
// over the chip read is kept twice, once near each half of the SMs (measured on an H200,
// docs/PERFORMANCE.md). The forward's working set is about two thirds of the adjoint's. The shots are then
// spread evenly over the batches (8 shots at most 5 at a time: 4 + 4, not 5 + 3). Measured in the second
// round on an H100 (50 MiB L2; docs/PERFORMANCE.md, "Where the gradient's time goes"), default problem:
// forward 8 and adjoint 4 at a time 64 ms per gradient, both 4 at a time 69 ms, both 8 at a time 71 ms.
// Where no more than one shot fits, or not even one (the large problem on an H100), one at a time is
// fastest: a second shot only adds traffic to memory (docs/PERFORMANCE.md, "Batches when one shot does
// not fit the cache").
void GpuPropagator::choose_batches() {
    int device = 0, l2_bytes = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    const double cache = kL2ShareForSteps * l2_bytes;
    const double cells = double(layout_.cells), frame = double(layout_.frame_cells());
    // Forward: u (2 slots); X (2 slots) and P (2 slots, x and z) in the layer. Adjoint: zeta (2 slots) and the
    // imaging sum; delta (2 slots) and rho (2 slots, x and z) in the layer.
    const ShotBatches batches = plan_shot_batches(problem_.nshots, shots_that_fit_memory(),
                                                  static_cast<int>(cache / (sizeof(float) * (2 * cells + 4 * frame))),
                                                  static_cast<int>(cache / (sizeof(float) * (3 * cells + 6 * frame))));
    gradient_batch_ = batches.gradient;
    adjoint_most_ = batches.adjoint_most;
}

void GpuPropagator::set_batch_sizes(int gradient_batch, int adjoint_group) {
    if (gradient_batch < 1 || adjoint_group < 1) throw UsageError("batch sizes must be at least 1");
    gradient_batch_ = std::min({gradient_batch, problem_.nshots, shots_that_fit_memory()});
    adjoint_most_ = std::min(adjoint_group, gradient_batch_);
}

int GpuPropagator::adjoint_group_size() const { return even_batch(gradient_batch_, adjoint_most_); }

GpuPropagator::~GpuPropagator() = default;  // here, where Workspace is complete

size_t GpuPropagator::fixed_bytes() const {
    return velocity_.bytes() + gradient_.bytes() + courant_.bytes() + forward_courant_.bytes() + rows_.bytes() +
           columns_.bytes() + receiver_of_col_.bytes() + forward_border_.bytes() + adjoint_border_.bytes() +
           observed_.bytes();
}

size_t GpuPropagator::gradient_bytes_per_shot() const {
    // A workspace of one shot: n shots take at most n times as much.
    return sizeof(float) * workspace_floats(problem_, layout_, true, 1, 1).total();
}

std::string GpuPropagator::memory_report() const {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    char text[256];
    std::snprintf(text, sizeof text,
                  "gradient needs %.2f GiB per shot (the imaging terms of every step are kept): %s, forward %d "
                  "and adjoint %d at a time; %.1f of %.1f GiB free",
                  gib(gradient_bytes_per_shot()), count_of(problem_.nshots, "shot").c_str(), gradient_batch_,
                  adjoint_group_size(), gib(free_bytes), gib(total_bytes));
    return text;
}

size_t GpuPropagator::observed_bytes() const {
    return sizeof(float) * size_t(problem_.nshots) * problem_.trace_samples();
}

void GpuPropagator::require_gradient_fits() const {
    if (gradient_batch_ >= 1) return;
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    char text[512];
    std::snprintf(
        text, sizeof text,
        "the gradient needs %.1f GiB of device memory for one shot, beside %.1f GiB for the observed traces of every "
        "shot (--nshots x --nt x --nrec floats), and %.1f GiB is free (of which %.0f%% and %.0f MiB are kept for "
        "other uses); use a smaller grid (--nz, --nx), fewer time steps (--nt), shots (--nshots) or receivers "
        "(--nrec)",
        gib(gradient_bytes_per_shot()), gib(observed_bytes()), gib(free_bytes + observed_.bytes()),
        100.0 * kKeptFreeShare, kKeptFreeMiB);
    throw DeviceMemoryError(text);
}

void GpuPropagator::set_velocity(const std::vector<float>& velocity) {
    if (velocity.size() != problem_.model_cells()) throw UsageError("velocity model has the wrong size");
    velocity_.upload(velocity, stream());
    velocity_changed();
}

void GpuPropagator::finish(const std::string& what) const { finish_within(stream_, gpu_work_limit_seconds(0.0), what); }

// (Each waits for the stream with a limit first: download's copy into pageable memory waits without one.)
std::vector<float> GpuPropagator::download_velocity() const {
    finish("the work before downloading the velocity model");
    return velocity_.download(problem_.model_cells(), stream());
}

std::vector<float> GpuPropagator::download_gradient() const {
    finish("the work before downloading the gradient");
    return gradient_.download(problem_.model_cells(), stream());
}

void GpuPropagator::velocity_changed() {
    const dim3 block(32, 8);
    for (float* courant : {courant_.data(), forward_courant_.data() + kForwardShift}) {
        courant_kernel<<<padded_grid(layout_, block), block, 0, stream()>>>(courant, velocity_.data(), layout_,
                                                                            float(problem_.dt / problem_.dh));
        CUDA_CHECK_LAUNCH();
    }
    finish("the Courant numbers of a new velocity model");
}

void GpuPropagator::set_observed(const std::vector<float>& traces) {
    const size_t expected = size_t(problem_.nshots) * problem_.trace_samples();
    if (traces.size() != expected) throw UsageError("observed traces have the wrong size");
    if (observed_.size() != expected) {
        allocated_bytes_ -= observed_.bytes();
        observed_ = DeviceBuffer<float>();
        require_observed_fits();
        observed_ = DeviceBuffer<float>(expected);
        allocated_bytes_ += observed_.bytes();
        peak_allocated_bytes_ = std::max(peak_allocated_bytes_, allocated_bytes_);
    }
    observed_.upload(traces, stream());
    finish("the copy of the observed traces");
}

// Before allocating the observed traces: make room by freeing the workspace of forward() (the gradient
// uses a workspace of its own), and refuse, naming the flags, when they still do not fit.
void GpuPropagator::require_observed_fits() {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (observed_bytes() <= free_bytes) return;
    release_workspace();
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (observed_bytes() <= free_bytes) return;
    char text[384];
    std::snprintf(text, sizeof text,
                  "the observed traces of every shot, --nshots x --nt x --nrec = %d x %d x %d floats (%.1f GiB), do "
                  "not fit in the %.1f GiB of device memory free; use fewer shots, time steps or receivers",
                  problem_.nshots, problem_.nt, problem_.nrec, gib(observed_bytes()), gib(free_bytes));
    throw DeviceMemoryError(text);
}

void GpuPropagator::count_workspace() {
    allocated_bytes_ = fixed_bytes() + (workspace_ ? workspace_->bytes() : 0);
    peak_allocated_bytes_ = std::max(peak_allocated_bytes_, allocated_bytes_);
}

void GpuPropagator::release_workspace() {
    graphs_.clear();
    workspace_.reset();
    allocated_bytes_ = fixed_bytes();
}

void GpuPropagator::ensure_workspace(Mode mode, int batch, int adjoint_group) {
    if (workspace_ && workspace_->mode == mode && workspace_->capacity >= batch &&
        workspace_->adjoint_capacity >= adjoint_group)
        return;
    release_workspace();

    const WorkspaceFloats f = workspace_floats(problem_, layout_, mode == Mode::gradient, batch, adjoint_group);
    auto w = std::make_unique<Workspace>();
    w->mode = mode;
    w->capacity = batch;
    w->adjoint_capacity = adjoint_group;
    w->u = DeviceBuffer<float>(f.u);
    w->x = DeviceBuffer<float>(f.x);
    w->px = DeviceBuffer<float>(f.px);
    w->pz = DeviceBuffer<float>(f.pz);
    w->traces = DeviceBuffer<float>(f.traces);
    if (mode == Mode::gradient) {
        w->h = DeviceBuffer<float>(f.h);
        w->gx = DeviceBuffer<float>(f.gx);
        w->zeta = DeviceBuffer<float>(f.zeta);
        w->delta = DeviceBuffer<float>(f.delta);
        w->rho_x = DeviceBuffer<float>(f.rho_x);
        w->rho_z = DeviceBuffer<float>(f.rho_z);
        w->image = DeviceBuffer<float>(f.image);
        size_t scratch_bytes = 0;
        CUDA_CHECK(sum_of_squares(nullptr, scratch_bytes, w->traces.data(), w->misfits.data(), w->traces.size()));
        w->misfit_scratch = DeviceBuffer<unsigned char>(std::max<size_t>(scratch_bytes, 1));  // null would query
    }
    w->source_cell = DeviceBuffer<int>(batch);
    w->shot_ids = DeviceBuffer<int>(batch);
    workspace_ = std::move(w);
    count_workspace();
}

void GpuPropagator::capture_forward(Mode mode, int batch) {
    Workspace& w = *workspace_;
    const FieldLayout& l = layout_;
    const size_t field_set = size_t(batch) * l.cells;  // one slot: all shots of the batch
    const size_t x_set = size_t(batch) * l.x_band_cells(), z_set = size_t(batch) * l.z_band_cells();
    const size_t frame_set = size_t(batch) * l.frame_cells();
    const StepConstants k = step_constants(Pass::forward);
    const bool keep_history = mode == Mode::gradient;
    const InnerRegion inner = step_region(Pass::forward);
    const int chains = begin_chains(batch, Pass::forward);
    for (int c = 0; c < chains; ++c) {
        // The chain's shots are [first, first + count) of the batch: each of its fields starts `first` shots
        // into the batch's. u[n] and X[n] live in slot (n+2) mod 2 (u[-1] in slot 1); P[n] in slot (n+1)
        // mod 2, so P[-1] = 0 starts in slot 0.
        const ShotRange shots = split_shots(batch, chains, c);
        const int first = shots.first, count = shots.count;
        // A chain whose step is small takes 4 rows per thread (see kForwardRows).
        const dim3 grid = inner_grid(inner, count, kForwardRows);
        const bool small_step = 2 * size_t(grid.x) * grid.y * grid.z <= size_t(forward_inner_places_);
        const int rows = small_step ? kSmallStepForwardRows : kForwardRows;
        const auto inner_kernel =
            small_step ? forward_inner_kernel<kSmallStepForwardRows> : forward_inner_kernel<kForwardRows>;
        const auto wave_slot = [&](const DeviceBuffer<float>& b, int n) {
            return b.data() + kForwardShift + size_t((n + 2) % kWaveSlots) * field_set + first * l.cells;
        };
        const auto px_slot = [&](int n) {
            return w.px.data() + size_t((n + 1) % 2) * x_set + first * l.x_band_cells();
        };
        const auto pz_slot = [&](int n) {
            return w.pz.data() + size_t((n + 1) % 2) * z_set + first * l.z_band_cells();
        };
        for (int n = 0; n + 1 < problem_.nt; ++n) {
            ForwardStep a{};
            a.u_prev = wave_slot(w.u, n - 1);
            a.u = wave_slot(w.u, n);
            a.u_next = wave_slot(w.u, n + 1);
            a.x_prev = wave_slot(w.x, n - 1);
            a.x = wave_slot(w.x, n);
            a.x_next = wave_slot(w.x, n + 1);
            a.px_prev = px_slot(n - 1);
            a.pz_prev = pz_slot(n - 1);
            a.px = px_slot(n);
            a.pz = pz_slot(n);
            a.source_cell = w.source_cell.data() + first;
            a.source_amplitude = acquisition_.wavelet[n];
            a.traces = w.traces.data() + first * k.trace_samples;
            a.h = keep_history ? w.h.data() + n * field_set + first * l.cells : nullptr;
            a.gx = keep_history ? w.gx.data() + n * frame_set + first * l.frame_cells() : nullptr;
            a.n = n;
            launch_step(chains_[c], inner, count, rows, inner_kernel, forward_border_kernel, k, a);
        }
    }
    end_chains(chains);
}

// The adjoint of shots [first, first + count) of the forward batch of `batch` shots: their residuals and
// history are that slice of the forward's (the history of step m holds the batch's shots side by side).
void GpuPropagator::capture_adjoint(int batch, int first, int count) {
    Workspace& w = *workspace_;
    const FieldLayout& l = layout_;
    const size_t field_set = size_t(count) * l.cells;
    const size_t history_set = size_t(batch) * l.cells, history_frame_set = size_t(batch) * l.frame_cells();
    const StepConstants k = step_constants(Pass::adjoint);
    const InnerRegion inner = step_region(Pass::adjoint);
    const int nt = problem_.nt;
    const int chains = begin_chains(count, Pass::adjoint);
    for (int c = 0; c < chains; ++c) {
        // The chain's shots are [first + chain_first, ... + chain_count) of the batch; its adjoint fields start
        // chain_first shots into the group's.
        const ShotRange shots = split_shots(count, chains, c);
        const int chain_first = shots.first, chain_count = shots.count;
        // Level m of an adjoint field lives in slot m mod 2: zeta[m+2] and zeta[m] share a slot, which is
        // the overwrite in place (see kWaveSlots), and rho[m-1] is written to slot (m+1) mod 2, as m-1 mod 2
        // would be negative at m = 0.
        const auto rotate = [&](const DeviceBuffer<float>& b, int m) {
            return b.data() + size_t(m % 2) * field_set + chain_first * l.cells;
        };
        const auto history = [&](const DeviceBuffer<float>& b, size_t set, size_t per_shot, int step) {
            return b.data() + step * set + (first + chain_first) * per_shot;
        };
        for (int m = nt - 1; m >= 0; --m) {
            // Imaging terms k = m and m+1 on the steps m = nt-3, nt-5, ..., and k = 0 alone at m = 0 when nt is even.
            const bool pair = m + 2 < nt && (nt - 2 - m) % 2 == 1;
            const bool image = pair || (m == 0 && nt % 2 == 0);
            AdjointStep a{};
            a.zeta2 = rotate(w.zeta, m + 2);
            a.zeta1 = rotate(w.zeta, m + 1);
            a.zeta = rotate(w.zeta, m);
            a.delta2 = rotate(w.delta, m + 2);
            a.delta1 = rotate(w.delta, m + 1);
            a.delta = rotate(w.delta, m);
            a.rho_x = rotate(w.rho_x, m);
            a.rho_z = rotate(w.rho_z, m);
            a.rho_x_next = rotate(w.rho_x, m + 1);
            a.rho_z_next = rotate(w.rho_z, m + 1);
            a.residual = w.traces.data() + (first + chain_first) * k.trace_samples;
            a.h = image ? history(w.h, history_set, l.cells, m) : nullptr;
            a.gx = image ? history(w.gx, history_frame_set, l.frame_cells(), m) : nullptr;
            a.h_later = pair ? history(w.h, history_set, l.cells, m + 1) : nullptr;
            a.gx_later = pair ? history(w.gx, history_frame_set, l.frame_cells(), m + 1) : nullptr;
            a.image = image ? w.image.data() + chain_first * l.cells : nullptr;
            a.m = m;
            launch_step(chains_[c], inner, chain_count, kAdjointRows,
                        image ? adjoint_inner_kernel<true> : adjoint_inner_kernel<false>,
                        image ? adjoint_border_kernel<true> : adjoint_border_kernel<false>, k, a);
        }
    }
    end_chains(chains);
}

// The inner rectangle and border table of a forward or an adjoint step.
InnerRegion GpuPropagator::step_region(Pass pass) const {
    InnerRegion region = pass_region(layout_, pass == Pass::adjoint);
    region.border = (pass == Pass::adjoint ? adjoint_border_ : forward_border_).data();
    return region;
}

// What every step of a pass reads and never changes; the forward pass has its own copy of the Courant
// numbers, stored kForwardShift floats further on.
StepConstants GpuPropagator::step_constants(Pass pass) const {
    StepConstants k{};
    k.layout = layout_;
    k.courant = pass == Pass::forward ? forward_courant_.data() + kForwardShift : courant_.data();
    k.rows = rows_.data();
    k.columns = columns_.data();
    k.receiver_row = acquisition_.receiver_row;
    k.receiver_of_col = receiver_of_col_.data();
    k.trace_samples = problem_.trace_samples();
    k.nrec = problem_.nrec;
    return k;
}

// One time step: the inner kernel on the chain's main stream and the border kernel on its side stream,
// joined before the next step. Captured into a graph, they become two parallel nodes per step.
template <typename Step>
void GpuPropagator::launch_step(const Chain& chain, const InnerRegion& inner, int batch, int cell_rows,
                                void (*inner_kernel)(StepConstants, Step, InnerRegion),
                                void (*border_kernel)(StepConstants, Step, InnerRegion, int), const StepConstants& k,
                                const Step& a) {
    CUDA_CHECK(cudaEventRecord(chain.fork.get(), chain.main.get()));
    CUDA_CHECK(cudaStreamWaitEvent(chain.side.get(), chain.fork.get()));
    const dim3 grid = inner_grid(inner, batch, cell_rows);
    if (grid.x > 0 && grid.y > 0)
        inner_kernel<<<grid, dim3(kInnerThreadsX, kInnerThreadsY), 0, chain.main.get()>>>(k, a, inner);
    const int cells = static_cast<int>(inner.border_cells(layout_));
    if (cells > 0)
        border_kernel<<<dim3((cells + kBorderThreads - 1) / kBorderThreads, 1, batch), kBorderThreads, 0,
                        chain.side.get()>>>(k, a, inner, cells);
    CUDA_CHECK(cudaEventRecord(chain.join.get(), chain.side.get()));
    CUDA_CHECK(cudaStreamWaitEvent(chain.main.get(), chain.join.get()));
}

// A time loop's shots split evenly over independent chains of launches (parallel branches of the graph),
// each starting after what stream_ holds; returns the number of chains. A step of a few shots leaves
// the GPU idle while its last blocks run, and the other chains' kernels fill those gaps. But every chain
// launches two kernels a step, and a step of one or two shots is short enough for the launches to count:
// the forward pass runs as two chains from 4 shots on, the adjoint as one chain per shot (up to
// kMaxChains) from 3 shots on, and both as one chain below that. Measured on an H200, default gradient,
// with programmatic edges (docs/PERFORMANCE.md, "Programmatic dependent launch" and "The host never
// waits"): one chain 56.0 ms; two 44.4; the forward pass as four chains of 2 shots 0.9 ms slower; the
// adjoint groups of 4 as four chains of one shot 0.7 ms faster than as two of 2; the gradient of 2 shots
// 16.0-16.1 ms with the adjoint as one chain, 16.3 as two.
int GpuPropagator::begin_chains(int shots, Pass pass) {
    const int chains = pass == Pass::adjoint ? (shots <= 2 ? 1 : std::min(kMaxChains, shots)) : (shots >= 4 ? 2 : 1);
    CUDA_CHECK(cudaEventRecord(loop_start_.get(), stream()));
    for (int c = 0; c < chains; ++c) CUDA_CHECK(cudaStreamWaitEvent(chains_[c].main.get(), loop_start_.get()));
    return chains;
}

void GpuPropagator::end_chains(int chains) {
    for (int c = 0; c < chains; ++c) {
        CUDA_CHECK(cudaEventRecord(chains_[c].done.get(), chains_[c].main.get()));
        CUDA_CHECK(cudaStreamWaitEvent(stream(), chains_[c].done.get()));
    }
}

// The time loop of the forward pass over `batch` shots (adjoint_count 0), or of the adjoint pass over
// shots [adjoint_first, adjoint_first + adjoint_count) of that batch; captured once and kept.
cudaGraphExec_t GpuPropagator::time_loop_graph(Mode mode, int batch, int adjoint_first, int adjoint_count) {
    const auto key = std::make_tuple(mode, batch, adjoint_first, adjoint_count);
    if (auto found = graphs_.find(key); found != graphs_.end()) return found->second.get();
    CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    try {
        if (adjoint_count > 0)
            capture_adjoint(batch, adjoint_first, adjoint_count);
        else
            capture_forward(mode, batch);
    } catch (...) {
        // Left capturing, the stream would fail every later call with an error of its own.
        cudaGraph_t partial = nullptr;
        if (cudaStreamEndCapture(stream(), &partial) == cudaSuccess && partial) cudaGraphDestroy(partial);
        throw;
    }
    const CudaGraph graph = CudaGraph::end_capture(stream());
    CUDA_CHECK_LAUNCH();
    if (programmatic_steps_) make_kernel_edges_programmatic(graph.get());  // see wait_for_previous_step
    return (graphs_[key] = CudaGraphExec(graph)).get();
}

// Uploads the batch's shot indices and source cells and zeroes the fields the time loops start from.
void GpuPropagator::start_batch(const std::vector<int>& shots, size_t first, int batch) {
    Workspace& w = *workspace_;
    std::vector<int> ids(shots.begin() + first, shots.begin() + first + batch), cells;
    for (int shot : ids) {
        if (shot < 0 || shot >= problem_.nshots) throw UsageError("shot index out of range");
        cells.push_back(static_cast<int>(layout_.index(acquisition_.source_row, acquisition_.source_col[shot])));
    }
    w.shot_ids.upload(ids, stream());
    w.source_cell.upload(cells, stream());
    CUDA_CHECK(cudaMemsetAsync(w.u.data(), 0, w.u.bytes(), stream()));
    CUDA_CHECK(cudaMemsetAsync(w.x.data(), 0, w.x.bytes(), stream()));
    CUDA_CHECK(cudaMemsetAsync(w.px.data(), 0, w.px.bytes(), stream()));
    CUDA_CHECK(cudaMemsetAsync(w.pz.data(), 0, w.pz.bytes(), stream()));
    // Trace sample 0 (u[0] = 0) is never written: the steps record u[n+1].
    CUDA_CHECK(cudaMemsetAsync(w.traces.data(), 0, w.traces.bytes(), stream()));
}

void GpuPropagator::start_adjoint() {
    Workspace& w = *workspace_;
    for (const DeviceBuffer<float>* b : {&w.zeta, &w.delta, &w.rho_x, &w.rho_z, &w.image})
        CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->bytes(), stream()));
}

std::vector<float> GpuPropagator::forward(const std::vector<int>& shots) {
    NvtxRange range("forward");
    const size_t trace_samples = problem_.trace_samples();
    const size_t per_shot = sizeof(float) * workspace_floats(problem_, layout_, false, 1, 0).total();
    const int fits = static_cast<int>(usable_free_bytes() / per_shot);
    const int batch_size = std::min<int>(int(shots.size()), std::max(fits, 1));
    std::vector<float> traces(shots.size() * trace_samples);
    ensure_workspace(Mode::forward_only, batch_size, 0);
    // The timers are read at the end. A copy into pageable memory (the vector) returns only once it is done,
    // after everything queued before it: each batch's loop is waited for first, with a limit, so that a GPU
    // that hangs in it cannot hold the host in that copy without one.
    std::vector<CudaEventTimer> timers;
    for (size_t first = 0; first < shots.size(); first += batch_size) {
        const int batch = std::min<int>(batch_size, int(shots.size() - first));
        start_batch(shots, first, batch);
        const cudaGraphExec_t loop = time_loop_graph(Mode::forward_only, batch);
        CudaEventTimer& timer = timers.emplace_back();
        timer.start(stream());
        CUDA_CHECK(cudaGraphLaunch(loop, stream()));
        timer.stop(stream());
        finish_within(stream_, gpu_work_limit_seconds(cell_updates(batch, 1)),
                      "the forward modelling of " + count_of(batch, "shot"));
        CUDA_CHECK(cudaMemcpyAsync(traces.data() + first * trace_samples, workspace_->traces.data(),
                                   batch * trace_samples * sizeof(float), cudaMemcpyDeviceToHost, stream()));
    }
    last_forward_loop_seconds_ = 0.0;
    for (const CudaEventTimer& timer : timers) last_forward_loop_seconds_ += timer.seconds();
    return traces;
}

std::vector<float> GpuPropagator::observed_traces_of(const std::vector<int>& shots) {
    const size_t per_shot = problem_.trace_samples();
    std::vector<float> all(size_t(problem_.nshots) * per_shot, 0.0f);
    const std::vector<float> traces = forward(shots);
    for (size_t k = 0; k < shots.size(); ++k)
        std::copy_n(traces.begin() + k * per_shot, per_shot, all.begin() + size_t(shots[k]) * per_shot);
    return all;
}

// The batch sizes were chosen from the memory free when this propagator was made. Other processes may have
// taken some of it since: above all, other ranks sharing this GPU, which made their propagators at the same
// moment and saw the same free memory. Where the workspace does not fit, the batch is lowered to what the
// free memory now holds (at most half the batch that failed), until it fits, and stays so.
std::pair<int, int> GpuPropagator::ensure_gradient_workspace(int shots) {
    for (;;) {
        // (No shots: no batch runs, and the gradient and misfit are zero.)
        const int batch_size = shots == 0 ? 1 : even_batch(shots, gradient_batch_);
        const int group_size = even_batch(batch_size, adjoint_most_);
        try {
            ensure_workspace(Mode::gradient, batch_size, group_size);
            return {batch_size, group_size};
        } catch (const DeviceMemoryError&) {
            // ensure_workspace released the old workspace first, and the new one's buffers are freed.
            const int fits = std::min((batch_size + 1) / 2, shots_that_fit_memory());
            if (batch_size <= 1 || fits < 1) throw;
            gradient_batch_ = fits;
            adjoint_most_ = std::min(adjoint_most_, gradient_batch_);
            print_note("the GPU's free memory no longer holds the gradient of " + std::to_string(batch_size) +
                       " shots at a time (other processes or ranks on this GPU took some): " +
                       std::to_string(gradient_batch_) + " at a time from now on");
        }
    }
}

GradientResult GpuPropagator::gradient(const std::vector<int>& shots) {
    NvtxRange range("gradient");
    require_gradient_fits();
    if (observed_.size() == 0) throw UsageError("gradient: observed traces were not set");
    const auto [batch_size, group_size] = ensure_gradient_workspace(int(shots.size()));
    const size_t batches = (shots.size() + batch_size - 1) / batch_size;
    const size_t trace_samples = problem_.trace_samples();
    Workspace& w = *workspace_;
    if (w.misfits.size() < batches) {
        w.misfits = DeviceBuffer<double>(batches);
        count_workspace();
    }
    CUDA_CHECK(cudaMemsetAsync(gradient_.data(), 0, gradient_.bytes(), stream()));

    // Everything below is queued on the stream without waiting: the timers and misfits are read at the end.
    CudaEventTimer timer;
    std::vector<CudaEventTimer> forward_timers(batches), adjoint_timers(batches);
    timer.start(stream());
    for (size_t b = 0; b < batches; ++b) {
        const size_t first = b * batch_size;
        const int batch = std::min<int>(batch_size, int(shots.size() - first));
        start_batch(shots, first, batch);
        const cudaGraphExec_t forward_loop = time_loop_graph(Mode::gradient, batch);
        forward_timers[b].start(stream());
        CUDA_CHECK(cudaGraphLaunch(forward_loop, stream()));
        forward_timers[b].stop(stream());
        const size_t samples = batch * trace_samples;
        residual_kernel<<<unsigned((samples + 255) / 256), 256, 0, stream()>>>(w.traces.data(), observed_.data(),
                                                                               w.shot_ids.data(), trace_samples, batch);
        CUDA_CHECK_LAUNCH();
        size_t scratch_bytes = w.misfit_scratch.size();
        CUDA_CHECK(sum_of_squares(w.misfit_scratch.data(), scratch_bytes, w.traces.data(), w.misfits.data() + b,
                                  samples, stream()));
        // The adjoint pass, a group of the batch's shots at a time; each group's imaging sum is folded into
        // the gradient.
        adjoint_timers[b].start(stream());
        for (int group_first = 0; group_first < batch; group_first += group_size) {
            const int group = std::min(group_size, batch - group_first);
            start_adjoint();
            CUDA_CHECK(cudaGraphLaunch(time_loop_graph(Mode::gradient, batch, group_first, group), stream()));
            const dim3 block(32, 8), grid((problem_.nx + 31) / 32, (problem_.nz + 7) / 8);
            fold_gradient_kernel<<<grid, block, 0, stream()>>>(gradient_.data(), w.image.data(), velocity_.data(),
                                                               layout_, group);
            CUDA_CHECK_LAUNCH();
        }
        adjoint_timers[b].stop(stream());
    }
    timer.stop(stream());
    finish_within(
        stream_, gpu_work_limit_seconds(cell_updates(shots.size(), 2)),
        "the gradient of " + count_of(static_cast<long long>(shots.size()), "shot"));  // complete on the device
    const std::vector<double> misfits = batches ? w.misfits.download(batches, stream()) : std::vector<double>();
    GradientResult result;
    for (size_t b = 0; b < batches; ++b) {
        result.misfit += 0.5 * misfits[b];
        result.forward_seconds += forward_timers[b].seconds();
        result.adjoint_seconds += adjoint_timers[b].seconds();
    }
    result.device_seconds = timer.seconds();
    return result;
}

}  // namespace fwi
