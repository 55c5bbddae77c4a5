// The FWI problem: grid, time stepping, absorbing layer, wavelet, acquisition geometry and models,
// built from named presets and command-line flags with every value range-checked.
#pragma once

#include <string>
#include <vector>

#include "cli.hpp"

namespace fwi {

// The most FWI iterations a run may ask for (--iterations of every FWI program).
constexpr int kMaxIterations = 100000;
// The most time steps a problem may have (--nt).
constexpr int kMaxTimeSteps = 100000;

struct Problem {
    std::string name = "default";
    // Grid and time stepping.
    int nz = 384, nx = 512;                     // cells (z is depth, rows; x is columns)
    double dh = 6.0;                            // cell size, m
    double dt = 0.0008;                         // time step, s
    int nt = 2000;                              // time steps
    int absorb_width = 20;                      // absorbing cells added on every side of the model
    static constexpr int kMinAbsorbWidth = 12;  // thinner layers grow without bound (problem.cpp)
    // Ricker wavelet.
    double freq = 14.0;   // peak frequency, Hz
    double delay = 0.08;  // time of the peak, s
    // Acquisition: shots on one row, receivers on one row, both spread evenly between two columns.
    int nshots = 8, src_depth = 2, src_x_first = 20, src_x_last = 491;
    int nrec = 128, rec_depth = 4, rec_x_first = 0, rec_x_last = 511;
    // Models.
    std::string model = "two-layer";           // two-layer | anomaly
    double v_top = 1500.0, v_bottom = 2500.0;  // two-layer: above and below the interface
    int interface_depth = 0;                   // two-layer: first row of the lower layer; 0: nz/2
    double anomaly_dv = 250.0;                 // anomaly: Gaussian of this amplitude in v_top
    double anomaly_radius = 0.125;             // ... with this standard deviation, fraction of nz
    double v_initial = 1500.0;                 // starting model: constant
    // Model update (common/update.hpp).
    double v_min = 1000.0, v_max = 3000.0;  // the update clips the model to this range
    double step_size = 40.0;                // largest velocity change per iteration, m/s
    int mask_rows = 10;                     // rows from the surface the update leaves alone
    double gradient_depth_power = 2.0;      // the update scales the gradient by (depth/nz)^this

    size_t model_cells() const { return static_cast<size_t>(nz) * nx; }
    size_t trace_samples() const { return static_cast<size_t>(nt) * nrec; }  // one shot's traces, nt x nrec
    // "384x512, 8 shots, nt 2000"
    std::string summary() const;
};

// Named problems: "default" (the classic small benchmark), "large" (1024 x 2048, 32 shots, for
// scaling; does not fit one GPU in one batch), "small" (for verification and tests), "comm" (2048 x 8192,
// 4 shots, nt 150: communication-bound, a 64 MiB gradient from little compute).
Problem problem_preset(const std::string& name);
const std::vector<std::string>& problem_preset_names();

// Registers --problem and every problem flag on `parser`, with `problem` as the target (so the
// defaults shown by --help are the chosen preset's). Call after problem_preset. Returns the flags it
// registered, for a program's rules on when they are used (ArgParser::add_used_only).
std::vector<std::string> add_problem_flags(ArgParser& parser, Problem& problem);

// The preset named by --problem in argv ("default" when absent). Register the flags on it with
// add_problem_flags, then parse, then validate.
Problem preset_from_args(int argc, const char* const* argv);

// Cross-flag checks (geometry inside the grid, shots and receivers on distinct cells, the true and initial
// models possible and stable: check_model in model_checks.hpp, a true model that differs from the initial
// one, fewer than 2 cells per shortest wavelength); throws UsageError naming the flag. Prints a warning to
// stderr below 5 cells per shortest wavelength.
void validate(const Problem& problem);
// The same, after `parser` has parsed the command line: where the flag a refusal names was not given (its
// value is the --problem preset's, as with --nx 256 and the default problem's --src-x-last 491), the
// message says so.
void validate(const Problem& problem, const ArgParser& parser);

// Model arrays, row-major [z][x], m/s.
std::vector<float> true_model(const Problem& problem);
std::vector<float> initial_model(const Problem& problem);

// Column of each shot / receiver (physical grid), and the Ricker wavelet sampled at n dt.
std::vector<int> shot_columns(const Problem& problem);
std::vector<int> receiver_columns(const Problem& problem);
std::vector<float> ricker_wavelet(const Problem& problem);
double ricker(double t, double freq, double delay);

// Highest frequency with significant energy in the wavelet (Ricker: 2.5 x peak, ~3% of the peak
// amplitude spectrum), used for the cells-per-wavelength warning.
inline double max_frequency(const Problem& problem) { return 2.5 * problem.freq; }

}  // namespace fwi
