// Writes DIR/checkpoint.fwi for the problem of the given flags, after one iteration, whose model is
// impossible in one cell (KIND: nan, negative, unstable or above-v-max) but whose checksum is valid: what a
// diverged run or another tool could leave. The bad_input_physics tests resume 06 from it. KIND
// 1000-iterations: a sound checkpoint after 1000 iterations, which a shorter run cannot continue.
// Usage: make_bad_checkpoint DIR KIND [problem flags]
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "cli.hpp"
#include "errors.hpp"
#include "problem.hpp"
#include "stencil.hpp"

using namespace fwi;

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(
            stderr,
            "usage: make_bad_checkpoint DIR nan|negative|unstable|above-v-max|1000-iterations [problem flags]\n");
        return kExitBadInput;
    }
    const std::string dir = argv[1], kind = argv[2];
    return run_program("make_bad_checkpoint", [&]() -> int {
        // The flags after DIR and KIND, parsed as the FWI programs parse them, so the fingerprint matches.
        std::vector<const char*> args = {argv[0]};
        for (int i = 3; i < argc; ++i) args.push_back(argv[i]);
        Problem problem = preset_from_args(int(args.size()), args.data());
        ArgParser parser("make_bad_checkpoint", "");
        add_problem_flags(parser, problem);
        if (!parser.parse(int(args.size()), args.data())) return kExitOk;
        validate(problem);

        std::vector<float> model = initial_model(problem);
        float& cell = model[problem.model_cells() / 2];
        int iterations_done = 1;
        if (kind == "1000-iterations")
            iterations_done = 1000;
        else if (kind == "nan")
            cell = std::numeric_limits<float>::quiet_NaN();
        else if (kind == "negative")
            cell = -1500.0f;
        else if (kind == "unstable")  // twice the fastest velocity the CFL limit allows
            cell = static_cast<float>(2.0 * max_stable_courant_number() * problem.dh / problem.dt);
        else if (kind == "above-v-max")  // stable, but beyond what the update would ever produce
            cell = static_cast<float>(problem.v_max + 100.0);
        else
            throw UsageError("KIND: '" + kind + "' is not one of nan|negative|unstable|above-v-max|1000-iterations");

        std::error_code error;
        std::filesystem::create_directories(dir, error);
        if (error) throw UsageError("DIR: cannot create '" + dir + "': " + error.message());
        const FwiState state{iterations_done, model, std::vector<double>(iterations_done, 1.0),
                             std::vector<double>(iterations_done, 0.1)};
        write_checkpoint(dir, Checkpoint{state, problem_fingerprint(problem), 1});
        std::printf("wrote %s (%s)\n", checkpoint_path(dir).c_str(), kind.c_str());
        return kExitOk;
    });
}
