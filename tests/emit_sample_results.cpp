// Writes the RESULT objects of the fwi skeleton's report (common/shot_parallel.cpp) for made-up runs,
// one JSON file each, into the folder given as the first argument: a verified run against a
// reference, a run without a reference, and failed ones (a wrong gradient, first misfit or final model; a zero or NaN
// misfit), each for its own reason. The test that runs it
// then checks every file against scripts/result_schema.py, so the schema is checked on what the real writer writes, no
// GPU needed. Exit 1 when a case does not verify or fail as it should.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "errors.hpp"
#include "shot_parallel.hpp"

using namespace fwi;

namespace {

RunSummary made_up_run(const Problem& p, int gpus) {
    RunSummary run;
    run.pattern = "05_nccl_mpi";
    run.gpus = run.ranks = gpus;
    run.misfits = {10.0, 9.0, 8.5};
    run.first_gradient.assign(p.model_cells(), 1.0f);
    run.final_model.assign(p.model_cells(), 2000.0f);
    run.compute = {0.010, 0.011, 0.012};
    run.wait = {0.0, 0.0005, 0.001};
    run.combine = {0.0002, 0.0002, 0.0003};
    run.update = {0.00005, 0.00005, 0.00006};
    run.time_per_gradient = 0.0123;
    run.time_per_iteration = 0.0124;
    run.details.add("to_host_s", 0.0001);
    return run;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: emit_sample_results DIR\n");
        return kExitBadInput;
    }
    const std::string dir = argv[1];
    return run_program("emit_sample_results", [&] {
        const Problem p = problem_preset("small");
        ReferenceRun reference;
        reference.time_per_gradient = 0.0250;
        reference.misfits = {10.0, 9.0, 8.5};
        reference.first_gradient.assign(p.model_cells(), 1.0f);
        reference.final_model.assign(p.model_cells(), 2000.0f);

        int failures = 0;
        // A run that must fail verification, with `cause` in the message; its RESULT goes to `file`.
        const auto expect_failure = [&](const std::string& what, const RunSummary& run, const ReferenceRun* against,
                                        const std::string& cause, const std::string& file) {
            try {
                report(p, run, against, dir + "/" + file);
                std::fprintf(stderr, "%s was reported as verified\n", what.c_str());
                ++failures;
            } catch (const VerificationError& error) {
                if (std::string(error.what()).find(cause) == std::string::npos) {
                    std::fprintf(stderr, "%s failed for another reason than '%s': %s\n", what.c_str(), cause.c_str(),
                                 error.what());
                    ++failures;
                } else {
                    std::printf("failed as it should: %s\n", error.what());
                }
            }
        };
        report(p, made_up_run(p, 2), &reference, dir + "/with_reference.json");
        report(p, made_up_run(p, 1), nullptr, dir + "/without_reference.json");
        RunSummary wrong = made_up_run(p, 2);
        wrong.first_gradient.assign(p.model_cells(), 0.5f);  // as if one GPU's shots were lost
        expect_failure("a gradient half the reference's", wrong, &reference, "the combine is wrong", "failed.json");
        RunSummary other_misfit = made_up_run(p, 2);
        other_misfit.misfits.front() *= 1.01;  // the gradient matches, the first misfit does not
        expect_failure("a first misfit 1% off the reference's", other_misfit, &reference, "the combine is wrong",
                       "failed_misfit.json");
        RunSummary drifted = made_up_run(p, 2);
        drifted.final_model.assign(p.model_cells(), 2020.0f);  // the first gradient matches, the end does not
        expect_failure("a final model 1% off the reference's", drifted, &reference,
                       "the first gradient matches the single-GPU run, but the final model differs",
                       "failed_model.json");
        // Nothing to verify is not a pass: a misfit of zero (the starting model already fits the data) and a
        // misfit that is not a number both fail.
        for (const double misfit : {0.0, std::nan("")}) {
            RunSummary degenerate = made_up_run(p, 1);
            degenerate.misfits = {misfit, misfit};
            expect_failure("a run whose misfit is " + std::to_string(misfit), degenerate, nullptr, "misfit",
                           "degenerate.json");
        }
        return failures ? kExitVerificationFailed : kExitOk;
    });
}
