// 01_single_gpu: full-waveform inversion on one GPU, the baseline every other lesson is measured against.
//
// What you learn: the FWI loop itself. Model the observed data in the true model, then repeat: compute
// the misfit and its gradient for all shots (forward pass, residuals, adjoint pass, imaging condition),
// and update the model. The loop is common/shot_parallel.cpp's run_iterations, the one every later
// lesson runs too: they change only how the shots are spread over GPUs and how the gradients are
// combined. Here one GPU holds every shot, so there is nothing to combine. The gradient and the model
// stay in device memory through every iteration; they are copied out only after the last one, for the files.
//
// What you should see: the misfit falling a little each iteration, each iteration's phases, the time
// per gradient (about 44 ms for the default problem on an H100, 40 ms on an H200), and a RESULT line.
// --verify instead compares the GPU propagator with the CPU reference on a small problem.
#include <cstdio>
#include <string>
#include <vector>

#include "device.hpp"
#include "errors.hpp"
#include "host_memory.hpp"
#include "launch_env.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "shot_parallel.hpp"
#include "verify_against_cpu.hpp"

using namespace fwi;

namespace {

struct Options {
    int iterations = 5;
    std::string out = "out/01_single_gpu";
    std::string json;
    bool verify = false;
};

// The files the run writes into --out at its end (below, after run_iterations).
const std::vector<std::string> kRunFiles{"true_model.npy", "initial_model.npy", "final_model.npy", "first_gradient.npy",
                                         "observed_gathers.npy"};

int run_fwi(const Problem& p, const Options& options) {
    // A bad --out or --json is refused before the run (and before the GPU check), not after it; --out
    // first, since --json may name a file in it (but not one of the run's own files). A refused run
    // removes the --out folders it made.
    OutputFolder out_folder(options.out);
    check_run_files_replaceable(options.out, kRunFiles, "--out");
    check_writable(options.json, "--json");
    check_not_a_run_file(options.json, "--json", options.out, "--out", kRunFiles);
    require_gpus(1);
    warn_of_other_processes(0, 1);
    out_folder.keep();
    std::printf("01_single_gpu: %s on %s\n", p.summary().c_str(), describe_device(0).c_str());

    // One GPU holds every shot: its share is the whole problem, and nothing needs combining.
    GpuShare share(p, ShotRange{0, p.nshots}, initial_model(p));
    std::printf("memory: %s\n", share.propagator().memory_report().c_str());
    ThreadTeam alone = team_of_one();
    constexpr int kOnlyMember = 0;
    const CombineStep nothing_to_combine;  // one GPU: its gradient is already the sum over every shot
    const MemberRecord record =
        run_iterations(alone, kOnlyMember, share, nothing_to_combine, kFirstIteration, options.iterations);

    write_model_npy(p, options.out, "true_model.npy", true_model(p));
    write_model_npy(p, options.out, "initial_model.npy", initial_model(p));
    write_model_npy(p, options.out, "final_model.npy", record.final_model);
    write_model_npy(p, options.out, "first_gradient.npy", record.first_gradient);
    share.set_model(true_model(p));  // the observed gathers are the traces of the true model
    const std::vector<float> observed = share.propagator().forward(share.shots());
    write_npy(options.out + "/observed_gathers.npy", observed.data(), {size_t(p.nshots), size_t(p.nt), size_t(p.nrec)});
    std::printf("wrote true/initial/final models, the first gradient and the observed gathers to %s/\n",
                options.out.c_str());

    // 01 is the reference the others are checked against; its own check is that the inversion works.
    RunSummary run = summarize(alone, kOnlyMember, record, "01_single_gpu", "", kFirstIteration);
    run.details.add("peak_device_bytes", static_cast<long long>(share.propagator().peak_allocated_bytes()));
    report(p, run, nullptr, options.json);
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    return run_program("01_single_gpu", [&]() -> int {
        // --verify uses the small problem unless --problem says otherwise.
        const bool verify_requested = ArgParser::find_switch(argc, argv, "--verify");
        Problem problem = ArgParser::find_value(argc, argv, "--problem").empty() && verify_requested
                              ? problem_preset("small")
                              : preset_from_args(argc, argv);
        Options options;
        ArgParser parser("01_single_gpu", "Full-waveform inversion on one GPU: the baseline of the suite.");
        add_problem_flags(parser, problem);
        parser.add_int("--iterations", &options.iterations, 1, kMaxIterations, "FWI iterations");
        parser.add_string("--out", &options.out, "folder for the .npy models, gradient and gathers");
        parser.add_string("--json", &options.json, "also write the RESULT object to this file");
        parser.add_switch("--verify", &options.verify,
                          "compare GPU and CPU reference on the (small by default) problem instead");
        parser.add_used_only(
            {"--iterations", "--out", "--step-size", "--gradient-depth-power", "--mask-rows"},
            [&options] { return !options.verify; },
            "without --verify (it computes one gradient: no model update, no model files)");
        if (!parser.parse(argc, argv)) return kExitOk;
        refuse_launch_as_several_ranks("01 runs on one GPU: run it without mpirun (03, 05 and 06 run a rank per GPU)");
        validate(problem, parser);
        require_host_memory(problem, 1, options.verify);
        if (options.verify) {
            check_writable(options.json, "--json");  // written at the end: refused now, not after the run
            require_gpus(1);
            warn_of_other_processes(0, 1);
            return verify_against_cpu(problem, options.json);
        }
        return run_fwi(problem, options);
    });
}
