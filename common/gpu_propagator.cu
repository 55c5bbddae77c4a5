#include "gpu_propagator.hpp"

#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/transform_reduce.h>

#include <algorithm>
#include <cstdio>

#include "cuda_timing.hpp"
#include "errors.hpp"
#include "nvtx.hpp"
#include "stencil.hpp"

namespace fwi {

namespace {

constexpr int kBlockX = 32, kBlockY = 8;

// What every step kernel needs that does not change during a run.
struct StepConstants {
    FieldLayout layout;
    const float* courant;
    const PmlAxis<float>* rows;
    const PmlAxis<float>* columns;
    int receiver_row;
    const int* receiver_of_col;  // per padded column: receiver index or -1
    size_t trace_samples;        // nt * nrec: one shot's traces
    int nrec;
};

// Batched fields: shot s of a batch starts at s * (cells of one field).
struct ForwardStep {
    const float* u_prev;
    const float* u;
    float* u_next;
    const float* x_prev;
    const float* x;
    float* x_next;
    const float* px_prev;  // P[n-1], x and z bands
    const float* pz_prev;
    float* px;             // P[n]
    float* pz;
    const int* source_cell;  // per shot of the batch
    float source_amplitude;  // wavelet sample n (the same wavelet for every shot)
    float* traces;           // records u[n+1] at the receivers: [shot][nt][nrec]
    int n;
};

struct AdjointStep {
    const float* zeta2;  // zeta[m+2]
    const float* zeta1;  // zeta[m+1]
    float* zeta;         // zeta[m]
    const float* delta2;
    const float* delta1;
    float* delta;
    const float* rho_x;  // rho[m]
    const float* rho_z;
    float* rho_x_next;   // rho[m-1]
    float* rho_z_next;
    const float* residual;  // [shot][nt][nrec], injected at the receivers at step m
    // Imaging (null at the first adjoint step, m = nt-1): u[m], P[m], and the per-shot sum.
    const float* u;
    const float* px;
    const float* pz;
    float* image;
    int m;
};

__global__ void __launch_bounds__(kBlockX* kBlockY)
    forward_step_kernel(const StepConstants k, const ForwardStep a) {
    const FieldLayout& l = k.layout;
    const int xp = blockIdx.x * blockDim.x + threadIdx.x;
    const int zp = blockIdx.y * blockDim.y + threadIdx.y;
    const int shot = blockIdx.z;
    if (xp >= l.nx_padded || zp >= l.nz_padded) return;
    const size_t i = l.index(zp, xp);
    const size_t field = shot * l.cells;
    const float* __restrict__ u = a.u + field;
    const float c = k.courant[i];

    float u_next;
    if (!l.in_layer(zp, xp)) {
        u_next = interior_update(u[i], laplacian(u, i, l.stride), a.u_prev[field + i], c);
        if (i == static_cast<size_t>(a.source_cell[shot])) u_next += a.source_amplitude;
    } else {
        const int xb = l.x_band_index(zp, xp), zb = l.z_band_index(zp, xp);
        const size_t x_band = shot * l.x_band_cells(), z_band = shot * l.z_band_cells();
        const LayerForward<float> r = layer_forward(
            u[i], a.u_prev[field + i], a.x[field + i], a.x_prev[field + i], second_difference(u, i, 1),
            second_difference(u, i, l.stride), first_difference(u, i, 1), first_difference(u, i, l.stride),
            xb >= 0 ? a.px_prev[x_band + xb] : 0.0f, zb >= 0 ? a.pz_prev[z_band + zb] : 0.0f, c, k.columns[xp],
            k.rows[zp]);
        u_next = r.u_next;
        a.x_next[field + i] = r.x_next;
        if (xb >= 0) a.px[x_band + xb] = r.px;
        if (zb >= 0) a.pz[z_band + zb] = r.pz;
    }
    a.u_next[field + i] = u_next;
    if (zp == k.receiver_row) {
        const int r = k.receiver_of_col[xp];
        if (r >= 0) a.traces[shot * k.trace_samples + static_cast<size_t>(a.n + 1) * k.nrec + r] = u_next;
    }
}

__global__ void __launch_bounds__(kBlockX* kBlockY)
    adjoint_step_kernel(const StepConstants k, const AdjointStep a) {
    const FieldLayout& l = k.layout;
    const int xp = blockIdx.x * blockDim.x + threadIdx.x;
    const int zp = blockIdx.y * blockDim.y + threadIdx.y;
    const int shot = blockIdx.z;
    if (xp >= l.nx_padded || zp >= l.nz_padded) return;
    const size_t i = l.index(zp, xp);
    const size_t field = shot * l.cells;
    const float* __restrict__ zeta1 = a.zeta1 + field;

    float coupling = laplacian(zeta1, i, l.stride);
    if (zp == k.receiver_row) {
        const int r = k.receiver_of_col[xp];
        if (r >= 0) coupling += a.residual[shot * k.trace_samples + static_cast<size_t>(a.m) * k.nrec + r];
    }
    if (l.near_layer(zp, xp))
        coupling += second_difference(a.delta1 + field, i, 1) - first_difference(a.rho_x + field, i, 1) -
                    first_difference(a.rho_z + field, i, l.stride);
    const float coupled = k.courant[i] * coupling;

    if (!l.in_layer(zp, xp)) {
        a.zeta[field + i] = coupled + 2.0f * zeta1[i] - a.zeta2[field + i];
        if (a.image) a.image[field + i] += zeta1[i] * laplacian(a.u + field, i, l.stride);
        return;
    }
    const LayerAdjoint<float> r =
        layer_adjoint(coupled, zeta1[i], a.zeta2[field + i], a.delta1[field + i], a.delta2[field + i],
                      a.rho_x[field + i], a.rho_z[field + i], k.columns[xp], k.rows[zp]);
    a.zeta[field + i] = r.zeta;
    a.delta[field + i] = r.delta;
    a.rho_x_next[field + i] = r.rho_x;
    a.rho_z_next[field + i] = r.rho_z;
    if (a.image) {
        const int xb = l.x_band_index(zp, xp), zb = l.z_band_index(zp, xp);
        const float px = xb >= 0 ? a.px[shot * l.x_band_cells() + xb] : 0.0f;
        const float pz = zb >= 0 ? a.pz[shot * l.z_band_cells() + zb] : 0.0f;
        const float* u = a.u + field;
        a.image[field + i] += (zeta1[i] + a.delta1[field + i]) * (second_difference(u, i, 1) - px) +
                              zeta1[i] * (second_difference(u, i, l.stride) - pz);
    }
}

// residual = synthetic - observed for each shot of the batch.
__global__ void residual_kernel(float* residual, const float* observed, const int* shot_ids, size_t trace_samples,
                                int batch) {
    const size_t k = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (k >= trace_samples * batch) return;
    const size_t shot = k / trace_samples, sample = k % trace_samples;
    residual[k] -= observed[shot_ids[shot] * trace_samples + sample];
}

// gradient[z][x] += 2 / v * (imaging summed over the batch and over every padded cell that copies the
// model cell). One thread per model cell and a fixed summation order: deterministic, no atomics.
__global__ void fold_gradient_kernel(float* gradient, const float* image, const float* velocity, FieldLayout l,
                                     int batch) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int z = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= l.nx || z >= l.nz) return;
    const int z_first = z == 0 ? 0 : z + l.width, z_last = z == l.nz - 1 ? l.nz_padded - 1 : z + l.width;
    const int x_first = x == 0 ? 0 : x + l.width, x_last = x == l.nx - 1 ? l.nx_padded - 1 : x + l.width;
    float sum = 0.0f;
    for (int zp = z_first; zp <= z_last; ++zp)
        for (int xp = x_first; xp <= x_last; ++xp)
            for (int s = 0; s < batch; ++s) sum += image[s * l.cells + l.index(zp, xp)];
    const size_t m = static_cast<size_t>(z) * l.nx + x;
    gradient[m] += 2.0f * sum / velocity[m];
}

__global__ void courant_kernel(float* courant, const float* velocity, FieldLayout l, float dt_over_dh) {
    const int xp = blockIdx.x * blockDim.x + threadIdx.x;
    const int zp = blockIdx.y * blockDim.y + threadIdx.y;
    if (xp >= l.nx_padded || zp >= l.nz_padded) return;
    const int z = min(max(zp - l.width, 0), l.nz - 1), x = min(max(xp - l.width, 0), l.nx - 1);
    const float courant_number = velocity[static_cast<size_t>(z) * l.nx + x] * dt_over_dh;
    courant[l.index(zp, xp)] = courant_number * courant_number;
}

struct Square {
    __host__ __device__ double operator()(float r) const { return double(r) * double(r); }
};

dim3 padded_grid(const FieldLayout& l, int batch) {
    return dim3((l.nx_padded + kBlockX - 1) / kBlockX, (l.nz_padded + kBlockY - 1) / kBlockY, batch);
}

}  // namespace

// Buffers for up to `capacity` shots. Gradient mode keeps every u[n] and P[n] (the history); forward-only
// mode rotates three u and two P fields. Slots are laid out [slot][shot][field], so one batch size's
// pointers are fixed and its time loop can be captured once as a graph.
struct GpuPropagator::Workspace {
    Mode mode;
    int capacity;
    int u_slots, p_slots;  // nt and nt (P[-1..nt-2]) with history; 3 and 2 without
    DeviceBuffer<float> u, x, px, pz;
    DeviceBuffer<float> zeta, delta, rho_x, rho_z, image;  // adjoint, gradient mode only
    DeviceBuffer<float> traces;                             // synthetic traces, then residuals
    DeviceBuffer<int> source_cell, shot_ids;
};

namespace {
size_t forward_floats_per_shot(const FieldLayout& l, int u_slots, int p_slots, size_t trace_samples) {
    return size_t(u_slots) * l.cells + 3 * l.cells + size_t(p_slots) * (l.x_band_cells() + l.z_band_cells()) +
           trace_samples;
}
size_t adjoint_floats_per_shot(const FieldLayout& l) {
    return 3 * l.cells + 3 * l.cells + 4 * l.cells + l.cells;  // zeta, delta, rho_x/z (2 each), image
}
}  // namespace

GpuPropagator::GpuPropagator(const Problem& problem, const std::vector<float>& velocity)
    : problem_(problem), layout_(make_layout(problem)), acquisition_(make_acquisition(problem, layout_)) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    velocity_ = DeviceBuffer<float>(problem.model_cells());
    gradient_ = DeviceBuffer<float>(problem.model_cells());
    courant_ = DeviceBuffer<float>(layout_.cells);
    CUDA_CHECK(cudaMemsetAsync(courant_.data(), 0, courant_.bytes(), stream_));  // the halo stays zero
    rows_ = DeviceBuffer<PmlAxis<float>>(layout_.nz_padded);
    columns_ = DeviceBuffer<PmlAxis<float>>(layout_.nx_padded);
    rows_.upload(pml_profile_as<float>(problem, layout_.nz_padded), stream_);
    columns_.upload(pml_profile_as<float>(problem, layout_.nx_padded), stream_);
    receiver_of_col_ = DeviceBuffer<int>(layout_.nx_padded);
    receiver_of_col_.upload(acquisition_.receiver_of_col, stream_);
    allocated_bytes_ = fixed_bytes();
    peak_allocated_bytes_ = allocated_bytes_;
    set_velocity(velocity);

    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    // Keep 5% and 256 MiB of what is free for the observed traces, the CUDA graphs and other users.
    const double usable = 0.95 * double(free_bytes) - 256.0 * 1024 * 1024;
    gradient_batch_ = static_cast<int>(std::min<double>(problem.nshots, usable / gradient_bytes_per_shot()));
    gradient_batch_ = std::max(gradient_batch_, 0);
}

GpuPropagator::~GpuPropagator() {
    for (auto& entry : graphs_) cudaGraphExecDestroy(entry.second);
    workspace_.reset();
    cudaStreamDestroy(stream_);
}

size_t GpuPropagator::fixed_bytes() const {
    return velocity_.bytes() + gradient_.bytes() + courant_.bytes() + rows_.bytes() + columns_.bytes() +
           receiver_of_col_.bytes() + observed_.bytes();
}

size_t GpuPropagator::gradient_bytes_per_shot() const {
    const size_t trace_samples = size_t(problem_.nt) * problem_.nrec;
    return sizeof(float) * (forward_floats_per_shot(layout_, problem_.nt, problem_.nt, trace_samples) +
                            adjoint_floats_per_shot(layout_));
}

std::string GpuPropagator::memory_report() const {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    char text[256];
    std::snprintf(text, sizeof text,
                  "gradient needs %.2f GiB per shot (every wavefield kept for the exact adjoint): batches of %d of "
                  "%d shots; %.1f of %.1f GiB free",
                  gib(gradient_bytes_per_shot()), gradient_batch_, problem_.nshots, gib(free_bytes), gib(total_bytes));
    return text;
}

void GpuPropagator::set_velocity(const std::vector<float>& velocity) {
    if (velocity.size() != problem_.model_cells()) throw UsageError("velocity model has the wrong size");
    velocity_.upload(velocity, stream_);
    const dim3 block(kBlockX, kBlockY);
    courant_kernel<<<padded_grid(layout_, 1), block, 0, stream_>>>(courant_.data(), velocity_.data(), layout_,
                                                                   float(problem_.dt / problem_.dh));
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuPropagator::set_observed(const std::vector<float>& traces) {
    const size_t expected = size_t(problem_.nshots) * problem_.nt * problem_.nrec;
    if (traces.size() != expected) throw UsageError("observed traces have the wrong size");
    if (observed_.size() != expected) {
        allocated_bytes_ -= observed_.bytes();
        observed_ = DeviceBuffer<float>(expected);
        allocated_bytes_ += observed_.bytes();
        peak_allocated_bytes_ = std::max(peak_allocated_bytes_, allocated_bytes_);
    }
    observed_.upload(traces, stream_);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuPropagator::ensure_workspace(Mode mode, int batch) {
    if (workspace_ && workspace_->mode == mode && workspace_->capacity >= batch) return;
    for (auto& entry : graphs_) CUDA_CHECK(cudaGraphExecDestroy(entry.second));
    graphs_.clear();
    workspace_.reset();

    const FieldLayout& l = layout_;
    const size_t trace_samples = size_t(problem_.nt) * problem_.nrec;
    auto w = std::make_unique<Workspace>();
    w->mode = mode;
    w->capacity = batch;
    w->u_slots = mode == Mode::gradient ? problem_.nt : 3;
    w->p_slots = mode == Mode::gradient ? problem_.nt : 2;
    w->u = DeviceBuffer<float>(size_t(w->u_slots) * batch * l.cells);
    w->x = DeviceBuffer<float>(3 * size_t(batch) * l.cells);
    w->px = DeviceBuffer<float>(size_t(w->p_slots) * batch * l.x_band_cells());
    w->pz = DeviceBuffer<float>(size_t(w->p_slots) * batch * l.z_band_cells());
    w->traces = DeviceBuffer<float>(size_t(batch) * trace_samples);
    if (mode == Mode::gradient) {
        w->zeta = DeviceBuffer<float>(3 * size_t(batch) * l.cells);
        w->delta = DeviceBuffer<float>(3 * size_t(batch) * l.cells);
        w->rho_x = DeviceBuffer<float>(2 * size_t(batch) * l.cells);
        w->rho_z = DeviceBuffer<float>(2 * size_t(batch) * l.cells);
        w->image = DeviceBuffer<float>(size_t(batch) * l.cells);
    }
    w->source_cell = DeviceBuffer<int>(batch);
    w->shot_ids = DeviceBuffer<int>(batch);
    workspace_ = std::move(w);
    allocated_bytes_ = fixed_bytes();
    for (const DeviceBuffer<float>* b : {&workspace_->u, &workspace_->x, &workspace_->px, &workspace_->pz,
                                         &workspace_->traces, &workspace_->zeta, &workspace_->delta,
                                         &workspace_->rho_x, &workspace_->rho_z, &workspace_->image})
        allocated_bytes_ += b->bytes();
    peak_allocated_bytes_ = std::max(peak_allocated_bytes_, allocated_bytes_);
}

void GpuPropagator::capture_forward(Mode mode, int batch) {
    Workspace& w = *workspace_;
    const FieldLayout& l = layout_;
    const size_t field_set = size_t(batch) * l.cells;  // one slot: all shots of the batch
    const size_t x_set = size_t(batch) * l.x_band_cells(), z_set = size_t(batch) * l.z_band_cells();
    const StepConstants k{l, courant_.data(), rows_.data(), columns_.data(), acquisition_.receiver_row,
                          receiver_of_col_.data(), size_t(problem_.nt) * problem_.nrec, problem_.nrec};
    // u[n] lives in slot n (history) or n mod 3; P[n] in slot n+1 (slot 0 holds P[-1] = 0) or (n+1) mod 2.
    const auto u_slot = [&](int n) { return w.u.data() + size_t((n + w.u_slots) % w.u_slots) * field_set; };
    const auto x_slot = [&](int n) { return w.x.data() + size_t((n + 3) % 3) * field_set; };
    const auto px_slot = [&](int n) { return w.px.data() + size_t((n + 1) % w.p_slots) * x_set; };
    const auto pz_slot = [&](int n) { return w.pz.data() + size_t((n + 1) % w.p_slots) * z_set; };
    const dim3 grid = padded_grid(l, batch), block(kBlockX, kBlockY);
    for (int n = 0; n + 1 < problem_.nt; ++n) {
        // With history, u[-1] is taken from slot 0, which holds u[0] = 0 (nothing there is written).
        const float* u_prev = mode == Mode::gradient && n == 0 ? u_slot(0) : u_slot(n - 1);
        const ForwardStep a{u_prev,       u_slot(n),    u_slot(n + 1), x_slot(n - 1),
                            x_slot(n),    x_slot(n + 1), px_slot(n - 1), pz_slot(n - 1),
                            px_slot(n),   pz_slot(n),   w.source_cell.data(),
                            acquisition_.wavelet[n],    w.traces.data(), n};
        forward_step_kernel<<<grid, block, 0, stream_>>>(k, a);
    }
}

void GpuPropagator::capture_adjoint(int batch) {
    Workspace& w = *workspace_;
    const FieldLayout& l = layout_;
    const size_t field_set = size_t(batch) * l.cells;
    const size_t x_set = size_t(batch) * l.x_band_cells(), z_set = size_t(batch) * l.z_band_cells();
    const StepConstants k{l, courant_.data(), rows_.data(), columns_.data(), acquisition_.receiver_row,
                          receiver_of_col_.data(), size_t(problem_.nt) * problem_.nrec, problem_.nrec};
    const auto rotate3 = [&](const DeviceBuffer<float>& b, int m) { return b.data() + size_t(m % 3) * field_set; };
    const auto rotate2 = [&](const DeviceBuffer<float>& b, int m) { return b.data() + size_t(m % 2) * field_set; };
    const dim3 grid = padded_grid(l, batch), block(kBlockX, kBlockY);
    const int nt = problem_.nt;
    for (int m = nt - 1; m >= 0; --m) {
        const bool image = m + 1 < nt;
        const AdjointStep a{rotate3(w.zeta, m + 2),  rotate3(w.zeta, m + 1),  rotate3(w.zeta, m),
                            rotate3(w.delta, m + 2), rotate3(w.delta, m + 1), rotate3(w.delta, m),
                            rotate2(w.rho_x, m),     rotate2(w.rho_z, m),     rotate2(w.rho_x, m + 1),
                            rotate2(w.rho_z, m + 1), w.traces.data(),
                            image ? w.u.data() + size_t(m) * field_set : nullptr,
                            image ? w.px.data() + size_t(m + 1) * x_set : nullptr,
                            image ? w.pz.data() + size_t(m + 1) * z_set : nullptr,
                            image ? w.image.data() : nullptr, m};
        adjoint_step_kernel<<<grid, block, 0, stream_>>>(k, a);
    }
}

cudaGraphExec_t GpuPropagator::time_loop_graph(Mode mode, int batch, bool adjoint) {
    const auto key = std::make_tuple(mode, batch, adjoint);
    if (auto found = graphs_.find(key); found != graphs_.end()) return found->second;
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    if (adjoint) capture_adjoint(batch);
    else capture_forward(mode, batch);
    CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    CUDA_CHECK_LAUNCH();
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    graphs_[key] = exec;
    return exec;
}

// Uploads the batch's shot indices and source cells and zeroes the fields the time loops start from.
void GpuPropagator::start_batch(const std::vector<int>& shots, size_t first, int batch) {
    Workspace& w = *workspace_;
    std::vector<int> ids(shots.begin() + first, shots.begin() + first + batch), cells;
    for (int shot : ids) {
        if (shot < 0 || shot >= problem_.nshots) throw UsageError("shot index out of range");
        cells.push_back(static_cast<int>(layout_.index(acquisition_.source_row, acquisition_.source_col[shot])));
    }
    w.shot_ids.upload(ids, stream_);
    w.source_cell.upload(cells, stream_);
    const size_t field_set = size_t(batch) * layout_.cells;
    const size_t initial_u_slots = w.mode == Mode::gradient ? 1 : 3;  // history: only u[0]; else all three
    CUDA_CHECK(cudaMemsetAsync(w.u.data(), 0, initial_u_slots * field_set * sizeof(float), stream_));
    CUDA_CHECK(cudaMemsetAsync(w.x.data(), 0, w.x.bytes(), stream_));
    CUDA_CHECK(cudaMemsetAsync(w.px.data(), 0, w.px.bytes(), stream_));
    CUDA_CHECK(cudaMemsetAsync(w.pz.data(), 0, w.pz.bytes(), stream_));
    CUDA_CHECK(cudaMemsetAsync(w.traces.data(), 0, w.traces.bytes(), stream_));  // u[0] = 0 is never written
    if (w.mode == Mode::gradient)
        for (const DeviceBuffer<float>* b : {&w.zeta, &w.delta, &w.rho_x, &w.rho_z, &w.image})
            CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->bytes(), stream_));
}

std::vector<float> GpuPropagator::forward(const std::vector<int>& shots) {
    NvtxRange range("forward");
    const size_t trace_samples = size_t(problem_.nt) * problem_.nrec;
    const size_t per_shot = sizeof(float) * forward_floats_per_shot(layout_, 3, 2, trace_samples);
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const int fits = static_cast<int>(0.9 * double(free_bytes) / per_shot);
    const int batch_size = std::min<int>(int(shots.size()), std::max(fits, 1));
    std::vector<float> traces(shots.size() * trace_samples);
    ensure_workspace(Mode::forward_only, batch_size);
    CudaEventTimer timer;
    last_forward_loop_seconds_ = 0.0;
    for (size_t first = 0; first < shots.size(); first += batch_size) {
        const int batch = std::min<int>(batch_size, int(shots.size() - first));
        start_batch(shots, first, batch);
        const cudaGraphExec_t loop = time_loop_graph(Mode::forward_only, batch, false);
        timer.start(stream_);
        CUDA_CHECK(cudaGraphLaunch(loop, stream_));
        timer.stop(stream_);
        last_forward_loop_seconds_ += timer.seconds();
        CUDA_CHECK(cudaMemcpyAsync(traces.data() + first * trace_samples, workspace_->traces.data(),
                                   batch * trace_samples * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    }
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return traces;
}

GradientResult GpuPropagator::gradient(const std::vector<int>& shots) {
    NvtxRange range("gradient");
    if (gradient_batch_ < 1)
        throw EnvironmentError("the gradient needs " + std::to_string(gib(gradient_bytes_per_shot())) +
                               " GiB of device memory for one shot and that much is not free; " +
                               "use a smaller grid (--nz, --nx) or fewer time steps (--nt)");
    if (observed_.size() == 0) throw UsageError("gradient: observed traces were not set");
    const int batch_size = std::min<int>(gradient_batch_, int(shots.size()));
    const size_t trace_samples = size_t(problem_.nt) * problem_.nrec;
    ensure_workspace(Mode::gradient, batch_size);
    CUDA_CHECK(cudaMemsetAsync(gradient_.data(), 0, gradient_.bytes(), stream_));

    CudaEventTimer timer;
    timer.start(stream_);
    double misfit = 0.0;
    for (size_t first = 0; first < shots.size(); first += batch_size) {
        const int batch = std::min<int>(batch_size, int(shots.size() - first));
        Workspace& w = *workspace_;
        start_batch(shots, first, batch);
        CUDA_CHECK(cudaGraphLaunch(time_loop_graph(Mode::gradient, batch, false), stream_));
        const size_t samples = batch * trace_samples;
        residual_kernel<<<unsigned((samples + 255) / 256), 256, 0, stream_>>>(w.traces.data(), observed_.data(),
                                                                             w.shot_ids.data(), trace_samples, batch);
        CUDA_CHECK_LAUNCH();
        misfit += 0.5 * thrust::transform_reduce(thrust::cuda::par.on(stream_), w.traces.data(),
                                                 w.traces.data() + samples, Square(), 0.0, thrust::plus<double>());
        CUDA_CHECK(cudaGraphLaunch(time_loop_graph(Mode::gradient, batch, true), stream_));
        const dim3 block(32, 8), grid((problem_.nx + 31) / 32, (problem_.nz + 7) / 8);
        fold_gradient_kernel<<<grid, block, 0, stream_>>>(gradient_.data(), w.image.data(), velocity_.data(),
                                                          layout_, batch);
        CUDA_CHECK_LAUNCH();
    }
    timer.stop(stream_);
    GradientResult result;
    result.misfit = misfit;
    result.gradient = gradient_.download(problem_.model_cells(), stream_);
    result.device_seconds = timer.seconds();
    return result;
}

}  // namespace fwi
