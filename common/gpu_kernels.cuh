// The GPU propagator's kernels and the structures they take: the step kernels of a time loop (an inner
// and a border kernel per step, forward and adjoint), and the small kernels around the loops (residuals,
// the gradient's fold onto the model grid, the Courant numbers, the misfit's sum). Included only by
// gpu_propagator.cu, which builds the time loops from them; a header of its own so that the host side
// reads from top to bottom, and one translation unit, so that the compiler sees the kernels as before.
#pragma once

#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_reduce.cuh>

#include <algorithm>

#include "stencil.hpp"

namespace fwi {

// Each time step runs two kernels side by side (parallel branches of the CUDA graph); blockIdx.z is the
// shot of the batch in both:
//  - the inner kernel covers the rectangle of the padded grid where the update is the plain interior
//    one (forward: outside the absorbing layer; adjoint: also beyond the layer's stencil reach). A
//    thread updates 4 columns x a few rows (see kForwardRows) with 16-byte loads, a window of column
//    vectors from 4 rows above to 4 below plus one vector on each side of each row: at 2 rows, 14 loads
//    for 8 cells, where one thread per cell issues 17 per cell. On grids that fit in L2 the step is bound by
//    load instructions and L2 traffic, not DRAM bytes (docs/PERFORMANCE.md);
//  - the border kernel covers the rest, one thread per cell, with the PML and its coupling terms.
// On GPUs of compute capability 9.0 and later, the steps of a time loop are joined by programmatic edges
// (see wait_for_previous_step): a step's kernels are launched while the previous step's are still running.
//
// Rows per thread: the adjoint's inner kernels hold 2 blocks per SM (90-108 registers at 3 rows), and
// with 3 rows a step of an adjoint group of 4 on the default problem is 256 blocks, one wave on 132 SMs
// (with 2 rows it was 384). The forward pass takes 2 rows, and 4 in a chain whose step is small: at most
// half as many blocks at 2 rows as fit on the GPU at once (on the default problem, chains of 1 or 2
// shots). Measured on an H200: default problem, adjoint 2 / 3 / 4 rows 26.5 / 25.8 / 26.1 ms; 4 rows in
// the forward's chains of 1-2 shots took T(1) from 15.1-15.2 to 14.3 ms and T(2) from 19.0-19.2 to 18.4,
// in its chains of 4 made the 8-shot gradient slower, and in one shot of 8192 x 8192 cells (a step of
// many waves) gave 81% of the memory roofline against 93-94% (docs/PERFORMANCE.md). Measured again with
// the rows on 32-byte sectors (see InnerRegion): 3 or 4 forward rows in chains of 4, or 4 adjoint rows, no faster.
constexpr int kCellColumns = 4, kAdjointRows = 3, kForwardRows = 2, kSmallStepForwardRows = 4;
// Each time level of a wave field needs two slots, not three: a step reads level n-1 only at the cell it
// writes level n+1 to, so the new level overwrites the old one in place (forward: u, X; adjoint: zeta,
// delta). The fields a stencil reads at its neighbours (u[n], zeta[m+1], rho) are never written in the
// same step. P is read only at its own cell (and, off the layer, at band index 0, a value not used); it
// has two slots as well, P[n-1] read and P[n] written, so that no step reads what it writes.
constexpr int kWaveSlots = 2;
constexpr int kInnerThreadsX = 32, kInnerThreadsY = 8, kBorderThreads = 128;

// The forward pass's own fields (u and X) and the Courant numbers it reads are stored kForwardShift floats
// further on than FieldLayout::index says; the history it writes, and every field of the adjoint, are
// not. The two passes want their inner rectangles to start at different columns (the forward's right
// after its absorbing layer, the adjoint's 4 columns further in, past the layer's stencil reach), and
// each is fastest when its warps start on a 128-byte cache line; the history must still start each row
// on a 32-byte sector, where the adjoint reads it on a line. Measured on an H200, default gradient: the
// forward pass 0.3 ms faster than with one layout for both passes (docs/PERFORMANCE.md).
constexpr int kForwardShift = 4;

// The inner rectangle of the padded grid, [z0, z1) x [x0, x1), and the border around it. x0 and x1 are
// chosen so that a row of the inner kernel's threads starts and ends on a 32-byte sector of its fields
// (stored column xp + FieldLayout::kLeadColumns + the pass's shift, a multiple of 8): the 16-byte loads
// are aligned, and on the default problem each warp's 128 columns start on a cache line, in both passes
// (docs/PERFORMANCE.md).
struct InnerRegion {
    int z0 = 0, z1 = 0, x0 = 0, x1 = 0;
    // The border cells (zp, xp), on the device: border thread k updates cell k (see border_table).
    const int2* border = nullptr;

    // `margin`: cells from the edge of the padded grid that need the border kernel; `shift`: floats by
    // which the pass's fields are stored further on (kForwardShift or 0).
    static InnerRegion make(const FieldLayout& l, int margin, int shift) {
        constexpr int kSector = FieldLayout::kFloatsPerSector;
        static_assert(FieldLayout::kLeadColumns % kSector == 0, "x0 and x1 below assume rows that start on a sector");
        const auto round_down = [](int column) { return column / kSector * kSector; };
        InnerRegion r;
        r.z0 = margin;
        r.z1 = std::max(margin, l.nz_padded - margin);
        r.x0 = round_down(margin + shift + kSector - 1) - shift;
        r.x1 = std::max(r.x0, round_down(l.nx_padded - margin + shift) - shift);
        return r;
    }
    size_t border_cells(const FieldLayout& l) const {
        return l.padded_cells() - static_cast<size_t>(z1 - z0) * (x1 - x0);
    }
};

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

// Batched fields: shot s of a batch starts at s * (cells of one field), s * (band cells) for P. u and X (and
// the Courant numbers in StepConstants) point kForwardShift floats past their buffers' starts; h does not.
struct ForwardStep {
    const float* u_prev;
    const float* u;
    float* u_next;
    const float* x_prev;
    const float* x;
    float* x_next;
    const float* px_prev;  // P[n-1], x and z bands
    const float* pz_prev;
    float* px;  // P[n]
    float* pz;
    const int* source_cell;  // per shot of the batch
    float source_amplitude;  // wavelet sample n (the same wavelet for every shot)
    float* traces;           // records u[n+1] at the receivers: [shot][nt][nrec]
    // What the imaging condition will need from step n (gradient mode; null otherwise):
    // h = L u[n] - Px[n] - Pz[n] on the stored grid, and gx = Lx u[n] - Px[n] on the layer's frame.
    float* h;
    float* gx;
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
    float* rho_x_next;  // rho[m-1]
    float* rho_z_next;
    const float* residual;  // [shot][nt][nrec], injected at the receivers at step m
    // Imaging: the per-shot sum image of xi[k+1] Gx[k] + zeta[k+1] Gz[k] = zeta[k+1] h[k] + delta[k+1] gx[k]
    // over the forward steps k = 0 .. nt-2. Every other adjoint step m adds two terms, k = m from h and gx
    // and k = m+1 from h_later and gx_later (zeta2 and delta2 still hold level m+2 when read), so the sum
    // is read and written half as often. On the steps in between, image, h and gx are null; h_later and
    // gx_later are null where a step adds k = m only.
    const float* h;
    const float* gx;
    const float* h_later;
    const float* gx_later;
    float* image;
    int m;
};

namespace {

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void store4(float* p, const float4& value) { *reinterpret_cast<float4*>(p) = value; }
__device__ __forceinline__ float lane(const float4& q, int v) {
    return v == 0 ? q.x : v == 1 ? q.y : v == 2 ? q.z : q.w;
}
__device__ __forceinline__ void set_lane(float4& q, int v, float value) {
    if (v == 0)
        q.x = value;
    else if (v == 1)
        q.y = value;
    else if (v == 2)
        q.z = value;
    else
        q.w = value;
}
constexpr float4 kZero4 = {0.0f, 0.0f, 0.0f, 0.0f};

// Programmatic dependent launch. In a time loop's graph, each step's kernels depend on the previous step's
// through programmatic edges (make_kernel_edges_programmatic, device.hpp), so the GPU launches them while the previous
// step still runs. Each kernel first does what needs nothing from the previous step (finds its cells, reads their
// Courant numbers and PML coefficients), then waits here until every kernel it depends on has finished and its writes
// are visible. It must neither read a wave field nor write anything before this call. Past it, the kernel lets the next
// step's kernels be launched. Without programmatic edges (a launch outside the graphs) the wait returns at once. Code
// compiled for a GPU before compute capability 9.0 has no wait, and the propagator then makes no programmatic edges
// (see its constructor).
__device__ __forceinline__ void wait_for_previous_step() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// A thread's view of one field around its cells, in registers: the 4 columns from kStencilRadius rows
// above the first row to kStencilRadius rows below the last.
template <int kRows>
struct Window {
    float4 column[kRows + 2 * kStencilRadius];

    __device__ void load(const float* field, size_t base, size_t stride) {
        // base is at least kStencilRadius rows in (the rows above the grid are stored), so no offset is negative.
        const float* top = field + (base - kStencilRadius * stride);
#pragma unroll
        for (int j = 0; j < kRows + 2 * kStencilRadius; ++j) column[j] = load4(top + j * stride);
    }
    // Row r of the cells with kStencilRadius values on each side: the side vectors come from `field`.
    __device__ void row_values(const float* field, size_t row_base, int r,
                               float (&row)[kCellColumns + 2 * kStencilRadius]) const {
        const float4 left = load4(field + row_base - kStencilRadius), right = load4(field + row_base + kCellColumns);
#pragma unroll
        for (int q = 0; q < kCellColumns; ++q) {
            row[q] = lane(left, q);
            row[kStencilRadius + q] = lane(column[r + kStencilRadius], q);
            row[kStencilRadius + kCellColumns + q] = lane(right, q);
        }
    }
    // The Laplacian of cell (r, v), the same expression as laplacian(): x part plus z part.
    __device__ float laplacian(const float (&row)[kCellColumns + 2 * kStencilRadius], int r, int v) const {
        float values[2 * kStencilRadius + 1];
#pragma unroll
        for (int d = 0; d <= 2 * kStencilRadius; ++d) values[d] = lane(column[r + d], v);
        return second_difference(row, kStencilRadius + v, 1) + second_difference(values, kStencilRadius, 1);
    }
};

// The first of the thread's kCellColumns x kCellRows cells in the inner rectangle; false past it.
template <int kCellRows>
__device__ bool locate_inner_cells(const InnerRegion& inner, const FieldLayout& l, int& zp0, int& xp0, size_t& base) {
    xp0 = inner.x0 + kCellColumns * int(blockIdx.x * blockDim.x + threadIdx.x);
    zp0 = inner.z0 + kCellRows * int(blockIdx.y * blockDim.y + threadIdx.y);
    base = l.index(zp0, xp0);
    return xp0 < inner.x1 && zp0 < inner.z1;
}

dim3 inner_grid(const InnerRegion& r, int batch, int cell_rows) {
    const int groups = (r.x1 - r.x0) / kCellColumns, row_blocks = (r.z1 - r.z0 + cell_rows - 1) / cell_rows;
    return dim3((groups + kInnerThreadsX - 1) / kInnerThreadsX, (row_blocks + kInnerThreadsY - 1) / kInnerThreadsY,
                batch);
}

// ---- Forward ----

template <int kRows>
__global__ void __launch_bounds__(kInnerThreadsX* kInnerThreadsY)
    forward_inner_kernel(const StepConstants k, const ForwardStep a, const InnerRegion inner) {
    const FieldLayout& l = k.layout;
    int zp0, xp0;
    size_t base;
    if (!locate_inner_cells<kRows>(inner, l, zp0, xp0, base)) return;
    const int shot = blockIdx.z;
    const size_t field = shot * l.cells;
    const float* __restrict__ u = a.u + field;
    float4 courant[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) courant[r] = load4(k.courant + base + r * size_t(l.stride));
    wait_for_previous_step();
    Window<kRows> window;
    window.load(u, base, l.stride);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        const int zp = zp0 + r;
        if (zp >= inner.z1) continue;
        const size_t row_base = base + r * size_t(l.stride);
        float row[kCellColumns + 2 * kStencilRadius];
        window.row_values(u, row_base, r, row);
        const float4 u_prev = load4(a.u_prev + field + row_base);
        float4 u_next, h;
#pragma unroll
        for (int v = 0; v < kCellColumns; ++v) {
            const float lap = window.laplacian(row, r, v);
            float next = interior_update(row[kStencilRadius + v], lap, lane(u_prev, v), lane(courant[r], v));
            if (row_base + v == static_cast<size_t>(a.source_cell[shot])) next += a.source_amplitude;
            set_lane(u_next, v, next);
            set_lane(h, v, lap);
            if (zp == k.receiver_row) {
                const int receiver = k.receiver_of_col[xp0 + v];
                if (receiver >= 0)
                    a.traces[shot * k.trace_samples + static_cast<size_t>(a.n + 1) * k.nrec + receiver] = next;
            }
        }
        store4(a.u_next + field + row_base, u_next);
        // Streaming stores (__stcs): the history is read once, much later, and should not evict the
        // wavefields from L2.
        if (a.h) __stcs(reinterpret_cast<float4*>(a.h + field + row_base), h);
    }
}

// One thread per border cell: the interior update, or the PML's. Every load comes before the branch
// between the two: a load inside a branch would wait for the branch's condition, and the step is bound by
// the latency of this kernel's loads. The layer's fields are read off the layer too (where they are
// zero, or at a clamped band index, and not used).
__global__ void __launch_bounds__(kBorderThreads)
    forward_border_kernel(const StepConstants k, const ForwardStep a, const InnerRegion inner, int cells) {
    const int cell = blockIdx.x * blockDim.x + threadIdx.x;
    if (cell >= cells) return;
    const FieldLayout& l = k.layout;
    const int zp = inner.border[cell].x, xp = inner.border[cell].y;
    const int shot = blockIdx.z;
    const size_t i = l.index(zp, xp);
    const size_t field = shot * l.cells;
    const float* __restrict__ u = a.u + field;
    const int xb = l.x_band_index(zp, xp), zb = l.z_band_index(zp, xp);
    const size_t x_band = shot * l.x_band_cells(), z_band = shot * l.z_band_cells();
    const float c = k.courant[i];
    const PmlAxis<float> ax = k.columns[xp], az = k.rows[zp];
    wait_for_previous_step();
    const float u_prev = a.u_prev[field + i], x = a.x[field + i], x_prev = a.x_prev[field + i];
    const float px_prev = a.px_prev[x_band + max(xb, 0)], pz_prev = a.pz_prev[z_band + max(zb, 0)];
    const float lap_x = second_difference(u, i, 1), lap_z = second_difference(u, i, l.stride);
    float u_next, h;
    if (!l.in_layer(zp, xp)) {
        h = lap_x + lap_z;
        u_next = interior_update(u[i], h, u_prev, c);
        if (i == static_cast<size_t>(a.source_cell[shot])) u_next += a.source_amplitude;
    } else {
        const LayerForward<float> r = layer_forward(u[i], u_prev, x, x_prev, lap_x, lap_z, first_difference(u, i, 1),
                                                    first_difference(u, i, l.stride), xb >= 0 ? px_prev : 0.0f,
                                                    zb >= 0 ? pz_prev : 0.0f, c, ax, az);
        u_next = r.u_next;
        h = lap_x + lap_z - r.px - r.pz;
        a.x_next[field + i] = r.x_next;
        if (xb >= 0) a.px[x_band + xb] = r.px;
        if (zb >= 0) a.pz[z_band + zb] = r.pz;
        if (a.gx) __stcs(a.gx + shot * l.frame_cells() + l.frame_index(zp, xp), lap_x - r.px);
    }
    a.u_next[field + i] = u_next;
    if (a.h) __stcs(a.h + field + i, h);
    if (zp == k.receiver_row) {
        const int r = k.receiver_of_col[xp];
        if (r >= 0) a.traces[shot * k.trace_samples + static_cast<size_t>(a.n + 1) * k.nrec + r] = u_next;
    }
}

// ---- Adjoint ----

// kImage: whether the step adds imaging terms (every other step). The steps without them run a version
// that neither reads the history nor holds the imaging sum: 90 registers instead of 108. (At 2 rows per
// thread that was 78 instead of 92, 3 blocks per SM instead of 2, and gained 0.9 ms; at 3 rows both hold
// 2 blocks per SM.)
template <bool kImage>
__global__ void __launch_bounds__(kInnerThreadsX* kInnerThreadsY)
    adjoint_inner_kernel(const StepConstants k, const AdjointStep a, const InnerRegion inner) {
    const FieldLayout& l = k.layout;
    int zp0, xp0;
    size_t base;
    if (!locate_inner_cells<kAdjointRows>(inner, l, zp0, xp0, base)) return;
    const int shot = blockIdx.z;
    const size_t field = shot * l.cells;
    const float* __restrict__ zeta_next = a.zeta1 + field;
    float4 courant[kAdjointRows];
#pragma unroll
    for (int r = 0; r < kAdjointRows; ++r) courant[r] = load4(k.courant + base + r * size_t(l.stride));
    wait_for_previous_step();
    Window<kAdjointRows> window;
    window.load(zeta_next, base, l.stride);
#pragma unroll
    for (int r = 0; r < kAdjointRows; ++r) {
        const int zp = zp0 + r;
        if (zp >= inner.z1) continue;
        const size_t row_base = base + r * size_t(l.stride);
        float row[kCellColumns + 2 * kStencilRadius];
        window.row_values(zeta_next, row_base, r, row);
        const float4 zeta2 = load4(a.zeta2 + field + row_base);
        float4 image = kImage ? load4(a.image + field + row_base) : kZero4;
        const float4 h = kImage ? __ldcs(reinterpret_cast<const float4*>(a.h + field + row_base)) : kZero4;
        const float4 h_later =
            kImage && a.h_later ? __ldcs(reinterpret_cast<const float4*>(a.h_later + field + row_base)) : kZero4;
        float4 zeta;
#pragma unroll
        for (int v = 0; v < kCellColumns; ++v) {
            const float zeta1 = row[kStencilRadius + v];
            float coupling = window.laplacian(row, r, v);
            if (zp == k.receiver_row) {
                const int receiver = k.receiver_of_col[xp0 + v];
                if (receiver >= 0)
                    coupling += a.residual[shot * k.trace_samples + static_cast<size_t>(a.m) * k.nrec + receiver];
            }
            set_lane(zeta, v, lane(courant[r], v) * coupling + 2.0f * zeta1 - lane(zeta2, v));
            if (kImage) set_lane(image, v, lane(image, v) + zeta1 * lane(h, v) + lane(zeta2, v) * lane(h_later, v));
        }
        store4(a.zeta + field + row_base, zeta);
        if (kImage) store4(a.image + field + row_base, image);
    }
}

// Every load before the first branch, as in forward_border_kernel. The layer coupling is summed without
// branches: its fields are zero off the layer, so the terms layer_coupling skips add exactly zero here.
// kImage as in adjoint_inner_kernel: without the imaging terms this kernel needs 40 registers instead of 48,
// so more of its blocks fit on an SM beside the inner kernel's (0.2 ms on an H200, docs/PERFORMANCE.md).
template <bool kImage>
__global__ void __launch_bounds__(kBorderThreads)
    adjoint_border_kernel(const StepConstants k, const AdjointStep a, const InnerRegion inner, int cells) {
    const int cell = blockIdx.x * blockDim.x + threadIdx.x;
    if (cell >= cells) return;
    const FieldLayout& l = k.layout;
    const int zp = inner.border[cell].x, xp = inner.border[cell].y;
    const int shot = blockIdx.z;
    const size_t i = l.index(zp, xp);
    const size_t field = shot * l.cells;
    // zeta[m+1] and delta[m+1]: "next" in the forward sense, the level this step reads (the adjoint runs
    // backwards from m+1 to m).
    const float* __restrict__ zeta_next = a.zeta1 + field;
    const float* __restrict__ delta_next = a.delta1 + field;
    const float* __restrict__ rho_x = a.rho_x + field;
    const float* __restrict__ rho_z = a.rho_z + field;
    const float c = k.courant[i];
    const PmlAxis<float> ax = k.columns[xp], az = k.rows[zp];
    wait_for_previous_step();
    const float zeta1 = zeta_next[i], zeta2 = a.zeta2[field + i], delta1 = delta_next[i], delta2 = a.delta2[field + i];
    float image = 0.0f, h = 0.0f, gx = 0.0f, h_later = 0.0f, gx_later = 0.0f;
    if (kImage) {
        const size_t frame = shot * l.frame_cells() + max(l.frame_index(zp, xp), 0);  // gx is used in the layer only
        image = a.image[field + i];
        h = __ldcs(a.h + field + i);
        gx = __ldcs(a.gx + frame);
        if (a.h_later) {
            h_later = __ldcs(a.h_later + field + i);
            gx_later = __ldcs(a.gx_later + frame);
        }
    }
    float coupling = laplacian(zeta_next, i, l.stride);
    if (zp == k.receiver_row) {
        const int r = k.receiver_of_col[xp];
        if (r >= 0) coupling += a.residual[shot * k.trace_samples + static_cast<size_t>(a.m) * k.nrec + r];
    }
    coupling +=
        second_difference(delta_next, i, 1) - first_difference(rho_x, i, 1) - first_difference(rho_z, i, l.stride);
    const float coupled = c * coupling;
    if (!l.in_layer(zp, xp)) {
        a.zeta[field + i] = coupled + 2.0f * zeta1 - zeta2;
        if (kImage) a.image[field + i] = image + zeta1 * h + zeta2 * h_later;
        return;
    }
    const LayerAdjoint<float> r = layer_adjoint(coupled, zeta1, zeta2, delta1, delta2, rho_x[i], rho_z[i], ax, az);
    a.zeta[field + i] = r.zeta;
    a.delta[field + i] = r.delta;
    a.rho_x_next[field + i] = r.rho_x;
    a.rho_z_next[field + i] = r.rho_z;
    if (kImage) a.image[field + i] = image + (zeta1 * h + delta1 * gx) + (zeta2 * h_later + delta2 * gx_later);
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

// The sum of the squares of `count` floats, in double, into *sum; with a null `scratch`, only sets
// `scratch_bytes` to what it needs (CUB's convention). A reduction over squares as an iterator: CUB's
// DeviceReduce::TransformReduce would be one call, but the CUB of CUDA 12.4, the oldest toolkit the
// suite builds with, lacks it.
cudaError_t sum_of_squares(void* scratch, size_t& scratch_bytes, const float* values, double* sum, size_t count,
                           cudaStream_t stream = nullptr) {
    const auto squares = thrust::make_transform_iterator(values, Square());
    return cub::DeviceReduce::Reduce(scratch, scratch_bytes, squares, sum, count, cuda::std::plus<double>(), 0.0,
                                     stream);
}

// One thread per cell, for the small setup kernels.
dim3 padded_grid(const FieldLayout& l, const dim3& block) {
    return dim3((l.nx_padded + block.x - 1) / block.x, (l.nz_padded + block.y - 1) / block.y);
}

}  // namespace

}  // namespace fwi
