// The writer side of tests/kill_while_writing.sh: writes, with the suite's own functions, a checkpoint
// (write_checkpoint), an .npy (write_npy) and a RESULT JSON file (emit_result) into DIR, over and over,
// each round with new content that can be checked on its own, until it is killed. The script SIGKILLs it
// at a random moment and checks every file is one round's whole version.
//
// usage: atomic_write_stress write DIR   loop forever; DIR/ready appears once every file has been written
//        atomic_write_stress once DIR    write one round and exit (a checkpoint for the data-safety tests)
//        atomic_write_stress check DIR   exit 0 when the checkpoint reads back and the .npy is whole and
//                                        consistent (the JSON the script checks with python3)
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "output.hpp"

using namespace fwi;

namespace {

// 1 MiB of floats: long enough to write that a random kill often lands inside a write.
constexpr size_t kRows = 512, kColumns = 512;
constexpr int kJsonValues = 1000;

// Every value of round r's .npy is r: a file mixing two rounds, or cut short, shows at once.
void write_round(const std::string& dir, int round) {
    const std::vector<float> pattern(kRows * kColumns, float(round));
    // The checkpoint carries its own checksum; read_checkpoint checks it.
    Checkpoint checkpoint{
        FwiState{round, pattern, std::vector<double>(round, 1.0 / round), std::vector<double>(round, 0.5)},
        "stress round " + std::to_string(round) + "\n", 1};
    write_checkpoint(dir, checkpoint);
    write_npy(dir + "/pattern.npy", pattern.data(), {kRows, kColumns});
    std::vector<long long> values;
    long long sum = 0;
    for (int k = 0; k < kJsonValues; ++k) {
        values.push_back(round + k);
        sum += round + k;
    }
    emit_result(
        JsonObject().add("kind", "atomic_write_stress").add("round", round).add("values", values).add("sum", sum),
        dir + "/result.json");
}

int check_npy(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (bytes.size() < 10 || bytes.compare(1, 5, "NUMPY") != 0) {
        std::fprintf(stderr, "%s: not an .npy file (%zu bytes)\n", path.c_str(), bytes.size());
        return 1;
    }
    const size_t header = size_t(static_cast<unsigned char>(bytes[8])) | size_t(static_cast<unsigned char>(bytes[9]))
                                                                             << 8;
    const size_t expected = 10 + header + kRows * kColumns * sizeof(float);
    if (bytes.size() != expected) {
        std::fprintf(stderr, "%s: %zu bytes, a whole file has %zu\n", path.c_str(), bytes.size(), expected);
        return 1;
    }
    const float* values = reinterpret_cast<const float*>(bytes.data() + 10 + header);
    for (size_t i = 0; i < kRows * kColumns; ++i) {
        if (values[i] != values[0]) {
            std::fprintf(stderr, "%s: value %zu is %g, value 0 is %g: two rounds mixed\n", path.c_str(), i,
                         double(values[i]), double(values[0]));
            return 1;
        }
    }
    return 0;
}

int check(const std::string& dir) {
    const Checkpoint checkpoint = read_checkpoint(dir, SIZE_MAX);  // throws when torn or damaged
    const int round = checkpoint.state.iterations_done;
    for (float value : checkpoint.state.velocity) {
        if (value != float(round)) {
            std::fprintf(stderr, "%s: the model of round %d holds %g\n", checkpoint_path(dir).c_str(), round,
                         double(value));
            return 1;
        }
    }
    return check_npy(dir + "/pattern.npy");
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc == 3 ? argv[1] : "";
    if (mode != "write" && mode != "once" && mode != "check") {
        std::fprintf(stderr, "usage: atomic_write_stress write|once|check DIR\n");
        return 2;
    }
    const std::string dir = argv[2];
    try {
        if (mode == "check") return check(dir);
        if (mode == "once") {
            write_round(dir, 1);
            return 0;
        }
        for (int round = 1;; ++round) {
            write_round(dir, round);
            if (round == 1) write_file_atomically(dir + "/ready", "");
        }
    } catch (const std::exception& error) {
        std::fprintf(stderr, "atomic_write_stress: %s\n", error.what());
        return 1;
    }
}
