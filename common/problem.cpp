#include "problem.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "errors.hpp"
#include "model_checks.hpp"

namespace fwi {

std::string Problem::summary() const {
    std::ostringstream text;
    text << nz << "x" << nx << ", " << count_of(nshots, "shot") << ", nt " << nt;
    return text.str();
}

const std::vector<std::string>& problem_preset_names() {
    static const std::vector<std::string> names = {"default", "large", "small", "comm"};
    return names;
}

Problem problem_preset(const std::string& name) {
    Problem p;  // the member defaults are the default problem
    p.name = name;
    if (name == "default") return p;
    if (name == "large") {
        p.nz = 1024;
        p.nx = 2048;
        p.nshots = 32;
        p.src_x_first = 20;
        p.src_x_last = 2027;
        p.nrec = 512;
        p.rec_x_last = 2047;
        // The interface at the default problem's depth (1152 m): at nz/2 (3072 m) its reflection would
        // arrive after the 1.6 s of recording and the misfit would be zero.
        p.interface_depth = 192;
        return p;
    }
    if (name == "small") {
        p.nz = 64;
        p.nx = 96;
        p.nt = 500;
        p.nshots = 4;
        p.src_x_first = 10;
        p.src_x_last = 85;
        p.nrec = 48;
        p.rec_x_last = 95;
        return p;
    }
    if (name == "comm") {
        // Communication-bound: a 64 MiB gradient (2048 x 8192 floats) from only 150 time steps, so that
        // summing the gradient takes as long as computing it when it goes through host memory (the
        // comparison's problem where the pattern matters). The wave travels about 30 cells in 150 steps,
        // so the interface is shallow (row 8) and the shots, receivers and update mask sit above it; a
        // 20 Hz wavelet peaking at 0.05 s fits the short recording (5.0 cells per shortest wavelength).
        p.nz = 2048;
        p.nx = 8192;
        p.nt = 150;
        p.freq = 20.0;
        p.delay = 0.05;
        p.nshots = 4;
        p.src_depth = 1;
        p.src_x_first = 20;
        p.src_x_last = 8171;
        p.nrec = 512;
        p.rec_depth = 2;
        p.rec_x_last = 8191;
        p.interface_depth = 8;
        p.mask_rows = 3;
        return p;
    }
    std::string allowed;
    for (const auto& n : problem_preset_names()) allowed += (allowed.empty() ? "" : "|") + n;
    throw UsageError("--problem: '" + shown_value(name) + "' is not one of " + allowed);
}

Problem preset_from_args(int argc, const char* const* argv) {
    const std::string name = ArgParser::find_value(argc, argv, "--problem");
    return problem_preset(name.empty() ? "default" : name);
}

std::vector<std::string> add_problem_flags(ArgParser& parser, Problem& p) {
    const size_t before = parser.flags().size();
    parser.add_choice("--problem", &p.name, problem_preset_names(),
                      "named problem; the flags below override its values");
    parser.add_int("--nz", &p.nz, 16, 16384, "grid cells in depth");
    parser.add_int("--nx", &p.nx, 16, 16384, "grid cells across");
    parser.add_double("--dh", &p.dh, 0.1, 1000.0, "cell size (m)");
    parser.add_double("--dt", &p.dt, 1e-6, 0.1, "time step (s)");
    parser.add_int("--nt", &p.nt, 2, kMaxTimeSteps, "time steps");
    // This PML has a slow instability at late times that grows faster the thinner the layer (measured with
    // the CPU reference, the small problem at the stability limit of --dt, over --nt's 100000 steps: 12 cells
    // end at 1e-4 of the first arrivals, 10 cells at 4e-2, 8 cells at 5e4; at the default --dt, 3 cells
    // already grow within the default problem's 2000 steps). The CPU test "the thinnest absorbing layer
    // stays quiet" holds the limit to that.
    parser.add_int("--absorb-width", &p.absorb_width, Problem::kMinAbsorbWidth, 200,
                   "absorbing cells added on each side (at least 12: a thinner layer grows without bound over a "
                   "long recording)");
    parser.add_double("--freq", &p.freq, 0.1, 1000.0, "Ricker peak frequency (Hz)");
    parser.add_double("--delay", &p.delay, 0.0, 100.0, "time of the Ricker peak (s)");
    parser.add_int("--nshots", &p.nshots, 1, 100000, "number of shots");
    parser.add_int("--src-depth", &p.src_depth, 0, 16383, "row of the shots (cells)");
    parser.add_int("--src-x-first", &p.src_x_first, 0, 16383, "column of the first shot");
    parser.add_int("--src-x-last", &p.src_x_last, 0, 16383, "column of the last shot");
    parser.add_int("--nrec", &p.nrec, 1, 16384, "number of receivers");
    parser.add_int("--rec-depth", &p.rec_depth, 0, 16383, "row of the receivers (cells)");
    parser.add_int("--rec-x-first", &p.rec_x_first, 0, 16383, "column of the first receiver");
    parser.add_int("--rec-x-last", &p.rec_x_last, 0, 16383, "column of the last receiver");
    parser.add_choice("--model", &p.model, {"two-layer", "anomaly"}, "true model");
    parser.add_double("--v-top", &p.v_top, 100.0, 10000.0, "velocity above the interface / background (m/s)");
    parser.add_double("--v-bottom", &p.v_bottom, 100.0, 10000.0, "velocity below the interface (m/s)");
    parser.add_int("--interface-depth", &p.interface_depth, 0, 16383, "two-layer: row of the interface (0: nz/2)");
    parser.add_double("--anomaly-dv", &p.anomaly_dv, -5000.0, 5000.0, "anomaly: peak velocity change (m/s)");
    parser.add_double("--anomaly-radius", &p.anomaly_radius, 0.01, 1.0,
                      "anomaly: standard deviation as a fraction of nz");
    parser.add_used_only(
        {"--v-bottom", "--interface-depth"}, [&p] { return p.model == "two-layer"; }, "with --model two-layer");
    parser.add_used_only(
        {"--anomaly-dv", "--anomaly-radius"}, [&p] { return p.model == "anomaly"; }, "with --model anomaly");
    parser.add_double("--v-initial", &p.v_initial, 100.0, 10000.0, "starting model velocity (m/s)");
    parser.add_double("--v-min", &p.v_min, 100.0, 10000.0, "lowest velocity the update may produce (m/s)");
    parser.add_double("--v-max", &p.v_max, 100.0, 10000.0, "highest velocity the update may produce (m/s)");
    // At 0 the model never changes and the run can only end in "misfit did not decrease"; 0.1 m/s is far
    // above float32's spacing at the fastest velocity allowed (0.001 m/s at 10000 m/s).
    parser.add_double("--step-size", &p.step_size, 0.1, 1000.0, "largest velocity change per iteration (m/s)");
    parser.add_int("--mask-rows", &p.mask_rows, 0, 16384,
                   "rows below the surface the update leaves unchanged (source/receiver footprint)");
    parser.add_double("--gradient-depth-power", &p.gradient_depth_power, 0.0, 4.0,
                      "the update scales the gradient by (depth / nz) to this power (0: no scaling)");
    const std::vector<std::string> all = parser.flags();
    return {all.begin() + long(before), all.end()};
}

namespace {

// A value on the grid but below `lo` is below what another flag allows (--src-x-last left of --src-x-first).
void require_in(const char* flag, int value, int lo, int hi, const std::string& why) {
    if (value >= lo && value <= hi) return;
    const std::string problem = value >= 0 && value <= hi ? "is below " + std::to_string(lo) : "is outside the grid";
    throw UsageError(std::string(flag) + ": " + std::to_string(value) + " " + problem + "; allowed " +
                     std::to_string(lo) + ".." + std::to_string(hi) + " (" + why + ")");
}

// The flags the true model is built from, with their values.
std::string true_model_flags(const Problem& p) {
    if (p.model == "two-layer")
        return "--model two-layer: --v-top " + format_number(p.v_top) + ", --v-bottom " + format_number(p.v_bottom);
    return "--model anomaly: --v-top " + format_number(p.v_top) + " + --anomaly-dv " + format_number(p.anomaly_dv);
}

}  // namespace

void validate(const Problem& p, const ArgParser& parser) {
    try {
        validate(p);
    } catch (const UsageError& e) {
        const std::string message = e.what();
        const std::string flag = message.substr(0, message.find(':'));
        if (!parser.has_flag(flag) || parser.was_given(flag)) throw;
        throw UsageError(message + " (" + flag + " was not given: it is the " + p.name + " problem's value)");
    }
}

namespace {

// The data must hold a wave that met the true model where it differs from the initial one, or the misfit
// is zero (or rounding) from the start and the run fails its check after all its work. A lower bound on
// when the first such wave can reach a receiver: straight down from the source to the shallowest row
// where the models differ and straight up to the receivers' row, at the fastest velocity of either
// model, from the wavelet's start (one period before its peak). A recording that ends before that is
// refused, naming the shortest --nt that does not end before it.
void check_reflection_recorded(const Problem& p, const std::vector<float>& truth, const std::vector<float>& initial) {
    int first_row = p.nz;
    for (size_t i = 0; i < truth.size() && first_row == p.nz; ++i)
        if (truth[i] != initial[i]) first_row = static_cast<int>(i / p.nx);
    const double fastest = std::max(double(*std::max_element(truth.begin(), truth.end())), p.v_initial);
    const int rows = std::max(0, first_row - p.src_depth) + std::max(0, first_row - p.rec_depth);
    const double wavelet_start = std::max(0.0, p.delay - 1.0 / p.freq);
    const double earliest = wavelet_start + rows * p.dh / fastest;
    // With a little slack for rounding, so that the --nt the message suggests is never refused itself.
    if ((p.nt - 1) * p.dt >= earliest * (1.0 - 1e-9)) return;
    const double shortest_nt = std::ceil(earliest / p.dt) + 1;  // a double: it may be past any int
    char allowed[120];
    if (shortest_nt <= kMaxTimeSteps)
        std::snprintf(allowed, sizeof allowed, "allowed --nt at least %.0f", shortest_nt);
    else
        std::snprintf(allowed, sizeof allowed, "no --nt up to %d is long enough at --dt %g: a larger --dt",
                      kMaxTimeSteps, p.dt);
    char text[900];
    std::snprintf(
        text, sizeof text,
        "--nt: the recording (%d steps, %.3g s) ends before any wave can reach a receiver from where the true model "
        "differs from the initial one (row %d, %g m deep): that takes at least %.3g s at %g m/s after the wavelet "
        "starts at %.3g s (one period before --delay); %s, or a shallower difference, or a shorter --delay (down "
        "to one period, %s s: a shorter one starts the wavelet abruptly)",
        p.nt, (p.nt - 1) * p.dt, first_row, first_row * p.dh, rows * p.dh / fastest, fastest, wavelet_start, allowed,
        format_number(1.0 / p.freq).c_str());
    throw UsageError(text);
}

// The largest |value| of the Ricker wavelet before t = 0, as a share of its peak: the part the recording cuts
// off. In a = pi freq (t - delay) the wavelet is (1 - 2a^2) exp(-a^2), whose side lobes peak at a^2 = 1.5
// (2 exp(-1.5) = 0.45 of the peak) and fall off beyond: the value at t = 0 where that lies beyond a lobe's
// peak, else the larger of the lobe's and the value at t = 0 (the main peak's side of the lobe).
double wavelet_cut_off(const Problem& p) {
    const double a = M_PI * p.freq * p.delay;  // |a| at t = 0
    const double at_start = std::fabs(ricker(0.0, p.freq, p.delay));
    return a * a >= 1.5 ? at_start : std::max(at_start, 2.0 * std::exp(-1.5));
}

// The grid's geometry: the absorbing layer, and where the sources and receivers are, each on a cell of its own.
void validate_geometry(const Problem& p) {
    require_in("--absorb-width", p.absorb_width, Problem::kMinAbsorbWidth, 200,
               "cells; a thinner absorbing layer grows without bound over a long recording");
    require_in("--src-depth", p.src_depth, 0, p.nz - 1, "rows of --nz");
    // Only the two-layer model has an interface (and only with it may --interface-depth be given).
    if (p.model == "two-layer" && p.interface_depth != 0)
        require_in("--interface-depth", p.interface_depth, 1, p.nz - 1, "rows of --nz; 0 for nz/2");
    require_in("--rec-depth", p.rec_depth, 0, p.nz - 1, "rows of --nz");
    // At nz or more the update changes no cell, and the run fails verification (the misfit never falls).
    require_in("--mask-rows", p.mask_rows, 0, p.nz - 1, "rows of --nz; the update changes the rows below the mask");
    require_in("--src-x-first", p.src_x_first, 0, p.nx - 1, "columns of --nx");
    require_in("--src-x-last", p.src_x_last, p.src_x_first, p.nx - 1, "from --src-x-first to nx-1");
    require_in("--rec-x-first", p.rec_x_first, 0, p.nx - 1, "columns of --nx");
    require_in("--rec-x-last", p.rec_x_last, p.rec_x_first, p.nx - 1, "from --rec-x-first to nx-1");
    // More shots or receivers than columns would put two on one cell (spread rounds to the nearest):
    // duplicate shots model the same data twice, duplicate receivers overwrite each other's traces.
    const int src_span = p.src_x_last - p.src_x_first + 1;
    if (p.nshots > src_span)
        throw UsageError("--nshots: " + std::to_string(p.nshots) + " shots do not fit on distinct cells; allowed 1.." +
                         std::to_string(src_span) + " (columns --src-x-first " + std::to_string(p.src_x_first) +
                         "..--src-x-last " + std::to_string(p.src_x_last) + ")");
    const int rec_span = p.rec_x_last - p.rec_x_first + 1;
    if (p.nrec > rec_span)
        throw UsageError("--nrec: " + std::to_string(p.nrec) + " receivers do not fit on distinct cells; allowed 1.." +
                         std::to_string(rec_span) + " (columns --rec-x-first " + std::to_string(p.rec_x_first) +
                         "..--rec-x-last " + std::to_string(p.rec_x_last) + ")");
}

// The range the update keeps the model in.
void validate_velocity_range(const Problem& p) {
    if (p.v_min >= p.v_max)
        throw UsageError("--v-min: " + format_number(p.v_min) + " must be below --v-max (" + format_number(p.v_max) +
                         ")");
}

// The source wavelet: its peak inside the recording, and a warning where it starts abruptly.
void validate_wavelet(const Problem& p) {
    if (p.delay > (p.nt - 1) * p.dt)
        throw UsageError("--delay: the wavelet peak must fall inside the recording; allowed 0.." +
                         format_at_most((p.nt - 1) * p.dt) + " s");
    // A Ricker wavelet is near zero (a thousandth of its peak) one period before its peak. Where the part
    // before t = 0, which the recording cuts off, reaches more than a hundredth of its peak (a peak less than
    // 0.85 periods in), the source is switched on abruptly: a step, with frequencies past the 2.5 x --freq
    // that the grid's cells per wavelength are checked for below.
    if (const double cut = wavelet_cut_off(p); cut > 0.01) {
        char text[400];
        std::snprintf(text, sizeof text,
                      "--delay %g s is less than one period of --freq %g Hz (%s s): the part of the wavelet before "
                      "the recording starts, cut off, reaches %.0f%% of its peak, a step with frequencies the grid "
                      "may not carry; a --delay of %s s or more starts it near zero",
                      p.delay, p.freq, format_number(1.0 / p.freq).c_str(), 100.0 * cut,
                      format_number(1.0 / p.freq).c_str());
        print_warning(text);
    }
}

// The models themselves (finite, positive, stable, within --v-min..--v-max), then the fastest velocity the
// update may produce; and a true model that differs from the initial one.
void validate_models(const Problem& p, const std::vector<float>& truth, const std::vector<float>& initial) {
    const std::string initial_flags = "--v-initial " + format_number(p.v_initial);
    check_model(p, truth, "the true model (" + true_model_flags(p) + ")");
    check_model(p, initial, "the initial model (" + initial_flags + ")");
    check_stable(p, p.v_max, "--v-max (the fastest velocity the update may produce)");
    // The initial model is v-initial everywhere: a true model that is too (v-top = v-bottom = v-initial, or
    // an anomaly of 0 m/s in v-top = v-initial) gives data the initial model already fits.
    if (truth == initial)
        throw UsageError(
            "nothing to invert: the true model (" + true_model_flags(p) + ") is the initial model (" + initial_flags +
            ") in every cell, so the misfit is zero from the start; give a true model that differs from --v-initial");
}

// Dispersion: below 2 cells per wavelength the grid cannot represent the wave at all (refused); below 5
// the 8th-order stencil's phase error shows (a warning), and so where the update may lower the model.
void check_dispersion(const Problem& p, const std::vector<float>& truth) {
    const double v_slowest = std::min(double(*std::min_element(truth.begin(), truth.end())), p.v_initial);
    const double cells_per_wavelength = v_slowest / (max_frequency(p) * p.dh);
    // With a little slack for rounding, so that the --dh or --freq the message suggests is never refused itself;
    // the count is shown rounded down (1.999 is not "2.00").
    if (cells_per_wavelength < 2.0 * (1.0 - 1e-9)) {
        char text[400];
        std::snprintf(text, sizeof text,
                      "--dh: %.2f cells per shortest wavelength (slowest velocity %g m/s of the models, %g Hz = 2.5 x "
                      "--freq, --dh %g m); allowed at least 2: --dh at most %s m or --freq at most %s Hz",
                      std::floor(cells_per_wavelength * 100.0) / 100.0, v_slowest, max_frequency(p), p.dh,
                      format_at_most(v_slowest / (2.0 * max_frequency(p))).c_str(),
                      format_at_most(p.freq * cells_per_wavelength / 2.0).c_str());
        throw UsageError(text);
    }
    if (cells_per_wavelength < 5.0) {
        char text[300];
        std::snprintf(text, sizeof text,
                      "only %.1f cells per shortest wavelength (v %g m/s, %g Hz, dh %g m); expect numerical dispersion "
                      "below 5",
                      cells_per_wavelength, v_slowest, max_frequency(p), p.dh);
        print_warning(text);
    }
    // The update may lower a cell to --v-min: a warning, not a refusal (an inversion need not go there),
    // where the grid could not carry the shortest waves at that speed.
    const double cells_at_v_min = p.v_min / (max_frequency(p) * p.dh);
    if (p.v_min < v_slowest && cells_per_wavelength >= 2.0 && cells_at_v_min < 2.0) {
        char text[300];
        std::snprintf(text, sizeof text,
                      "the update may lower the model to --v-min %g m/s, where the grid has only %.2f cells per "
                      "shortest wavelength (%g Hz, --dh %g m; it cannot carry such waves below 2): --v-min at least %s",
                      p.v_min, std::floor(cells_at_v_min * 100.0) / 100.0, max_frequency(p), p.dh,
                      format_number(std::ceil(2.0 * max_frequency(p) * p.dh)).c_str());
        print_warning(text);
    }
}

}  // namespace

void validate(const Problem& p) {
    validate_geometry(p);
    validate_velocity_range(p);
    validate_wavelet(p);
    const std::vector<float> truth = true_model(p), initial = initial_model(p);
    validate_models(p, truth, initial);
    check_dispersion(p, truth);
    check_reflection_recorded(p, truth, initial);
}

std::vector<float> true_model(const Problem& p) {
    std::vector<float> v(p.model_cells());
    const double z0 = 0.5 * (p.nz - 1), x0 = 0.5 * (p.nx - 1);
    const double sigma = p.anomaly_radius * p.nz;
    const int interface = p.interface_depth != 0 ? p.interface_depth : p.nz / 2;
    for (int z = 0; z < p.nz; ++z)
        for (int x = 0; x < p.nx; ++x) {
            double value;
            if (p.model == "two-layer") {
                value = z < interface ? p.v_top : p.v_bottom;
            } else {  // anomaly
                const double r2 = (z - z0) * (z - z0) + (x - x0) * (x - x0);
                value = p.v_top + p.anomaly_dv * std::exp(-0.5 * r2 / (sigma * sigma));
            }
            v[static_cast<size_t>(z) * p.nx + x] = static_cast<float>(value);
        }
    return v;
}

std::vector<float> initial_model(const Problem& p) {
    return std::vector<float>(p.model_cells(), static_cast<float>(p.v_initial));
}

namespace {
// `count` columns spread evenly from first to last, rounded to the nearest cell.
std::vector<int> spread(int count, int first, int last) {
    std::vector<int> columns(count);
    for (int i = 0; i < count; ++i)
        columns[i] =
            count == 1 ? first : static_cast<int>(std::lround(first + double(i) * (last - first) / (count - 1)));
    return columns;
}
}  // namespace

std::vector<int> shot_columns(const Problem& p) { return spread(p.nshots, p.src_x_first, p.src_x_last); }
std::vector<int> receiver_columns(const Problem& p) { return spread(p.nrec, p.rec_x_first, p.rec_x_last); }

double ricker(double t, double freq, double delay) {
    const double arg = M_PI * freq * (t - delay);
    return (1.0 - 2.0 * arg * arg) * std::exp(-arg * arg);
}

std::vector<float> ricker_wavelet(const Problem& p) {
    std::vector<float> w(p.nt);
    for (int n = 0; n < p.nt; ++n) w[n] = static_cast<float>(ricker(n * p.dt, p.freq, p.delay));
    return w;
}

}  // namespace fwi
