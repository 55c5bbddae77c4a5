// CPU tests of what 06 writes and reads besides the GPU work: the checkpoint file (round trip, atomic
// replacement, damage detected), the resume checks, and the loss history files.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "checkpoint.hpp"
#include "errors.hpp"
#include "fnv1a.hpp"
#include "output.hpp"
#include "run_files.hpp"

using namespace fwi;
namespace fs = std::filesystem;

namespace {

// A fresh folder under the system's temporary folder, removed at the end of the test.
struct TemporaryFolder {
    fs::path path;
    TemporaryFolder() {
        path = fs::temp_directory_path() / ("fwi_checkpoint_test_" + std::to_string(::getpid()));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TemporaryFolder() { fs::remove_all(path); }
    std::string str() const { return path.string(); }
};

Problem small_problem() { return problem_preset("small"); }

Checkpoint sample_checkpoint(const Problem& p, int iterations_done) {
    Checkpoint c;
    c.problem_text = problem_fingerprint(p);
    c.ranks = 3;
    c.state.iterations_done = iterations_done;
    c.state.velocity = initial_model(p);
    c.state.velocity[17] = 1501.25f;
    c.state.velocity.back() = 2499.5f;
    for (int i = 0; i < iterations_done; ++i) {
        c.state.misfits.push_back(314.25 / (i + 1));
        c.state.iteration_seconds.push_back(0.01 * (i + 1));
    }
    return c;
}

// read_checkpoint as 06 calls it for the small problem.
Checkpoint read_small(const std::string& dir) {
    return read_checkpoint(dir, largest_checkpoint_bytes(small_problem()));
}

std::string read_file(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << bytes;
}

std::string usage_error_text(const std::function<void()>& action) {
    try {
        action();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no UsageError)";
}

// The file's last 8 bytes are FNV-1a (64 bit) of the rest: `body` with its checksum recomputed, so that a
// layout error reaches the checks that follow the checksum (a file another tool wrote whole).
std::string sealed(const std::string& body) {
    const uint64_t hash = fnv1a(body.data(), body.size());
    std::string bytes = body;
    bytes.append(reinterpret_cast<const char*>(&hash), sizeof hash);
    return bytes;
}

}  // namespace

TEST_CASE("the checksum is FNV-1a, 64 bit, as the files already written have it") {
    CHECK(fnv1a("", 0) == 0xcbf29ce484222325ull);
    CHECK(fnv1a("a", 1) == 0xaf63dc4c8601ec8cull);
    CHECK(fnv1a("foobar", 6) == 0x85944171f73967e8ull);
    CHECK(fnv1a("bar", 3, fnv1a("foo", 3)) == fnv1a("foobar", 6));  // in parts, as the command-line check
}

TEST_CASE("a checkpoint survives the round trip through its file unchanged") {
    const TemporaryFolder folder;
    const Problem p = small_problem();
    const Checkpoint written = sample_checkpoint(p, 4);
    write_checkpoint(folder.str(), written);
    const Checkpoint read = read_small(folder.str());
    CHECK(read.state.iterations_done == 4);
    CHECK(read.ranks == 3);
    CHECK(read.problem_text == written.problem_text);
    CHECK(read.state.velocity == written.state.velocity);  // bit for bit
    CHECK(read.state.misfits == written.state.misfits);
    CHECK(read.state.iteration_seconds == written.state.iteration_seconds);
}

TEST_CASE("writing is atomic: temporary file renamed over the old checkpoint, none left behind") {
    const TemporaryFolder folder;
    const Problem p = small_problem();
    const std::string path = checkpoint_path(folder.str());
    // A crash while writing leaves a partial temporary file (named after a process that is gone); it must
    // not be read, and the next write removes it. A file of the user's named like it, but not in the
    // suite's form, stays.
    const std::string stale = path + ".tmp.999999999.0000001f", users = path + ".tmp";
    const std::string older_stale = path + ".tmp.999999998.12";  // N in decimal, as earlier versions wrote it
    const std::string users_hex = path + ".tmp.999999997.cafe";  // hex, but not 8 digits: not the suite's
    write_file(stale, "partial");
    write_file(older_stale, "partial");
    write_file(users, "the user's");
    write_file(users_hex, "the user's");
    write_checkpoint(folder.str(), sample_checkpoint(p, 2));
    CHECK_FALSE(fs::exists(stale));
    CHECK_FALSE(fs::exists(older_stale));
    CHECK(read_file(users) == "the user's");
    CHECK(read_file(users_hex) == "the user's");
    write_checkpoint(folder.str(), sample_checkpoint(p, 5));
    CHECK(read_small(folder.str()).state.iterations_done == 5);
    CHECK(read_file(path) == encode_checkpoint(sample_checkpoint(p, 5)));
}

TEST_CASE("a folder where the checkpoint should be is refused, not read") {
    const TemporaryFolder folder;
    std::filesystem::create_directory(checkpoint_path(folder.str()));
    CHECK(usage_error_text([&] { read_small(folder.str()); }).find("not a regular file") != std::string::npos);
}

TEST_CASE("--resume given the checkpoint file, not its folder, says that it takes the folder") {
    const TemporaryFolder folder;
    write_checkpoint(folder.str(), sample_checkpoint(small_problem(), 2));
    CHECK(usage_error_text([&] { read_small(checkpoint_path(folder.str())); }) ==
          "--resume: '" + checkpoint_path(folder.str()) +
              "' is a file; --resume takes the folder that holds the checkpoint (the run's --out folder)");
}

TEST_CASE("--resume given a device or a pipe says that it takes a folder (not: no checkpoint in it)") {
    CHECK(usage_error_text([&] { read_small("/dev/null"); }) ==
          "--resume: '/dev/null' is not a folder; --resume takes the folder that holds the checkpoint (the run's "
          "--out folder)");
}

TEST_CASE("a checkpoint that is there but cannot be opened is refused as unreadable, not as missing") {
    const TemporaryFolder folder;
    const std::string path = checkpoint_path(folder.str());
    std::filesystem::create_symlink(path, path);  // a link to itself: no open succeeds, even for root
    const std::string text = usage_error_text([&] { read_small(folder.str()); });
    MESSAGE(text);
    CHECK(text.find("--resume: cannot read the checkpoint '" + path + "': ") == 0);
    CHECK(text.find("no checkpoint") == std::string::npos);
}

TEST_CASE("a missing, torn or damaged checkpoint is refused, naming --resume") {
    const TemporaryFolder folder;
    CHECK(usage_error_text([&] { read_small(folder.str()); }).find("--resume: no checkpoint") == 0);

    const std::string bytes = encode_checkpoint(sample_checkpoint(small_problem(), 3));
    const std::string path = checkpoint_path(folder.str());
    write_file(path, bytes.substr(0, bytes.size() / 2));  // torn
    CHECK(usage_error_text([&] { read_small(folder.str()); }).find("--resume") != std::string::npos);

    std::string damaged = bytes;
    damaged[bytes.size() / 2] ^= 0x01;  // one bit of the model
    write_file(path, damaged);
    CHECK(usage_error_text([&] { read_small(folder.str()); }).find("checksum") != std::string::npos);

    write_file(path, "not a checkpoint at all");
    CHECK(usage_error_text([&] { read_small(folder.str()); }).find("magic") != std::string::npos);
    CHECK_THROWS_AS(decode_checkpoint("", "empty"), UsageError);
}

TEST_CASE("a file larger than the problem's checkpoint can be is refused before it is read") {
    const TemporaryFolder folder;
    const std::string path = checkpoint_path(folder.str());
    const size_t largest = largest_checkpoint_bytes(small_problem());
    CHECK(encode_checkpoint(sample_checkpoint(small_problem(), kMaxIterations)).size() <= largest);
    write_file(path, std::string(largest + 1, 'x'));
    const std::string text = usage_error_text([&] { read_small(folder.str()); });
    CHECK(text.find("--resume") != std::string::npos);
    CHECK(text.find("bytes, more than a checkpoint") != std::string::npos);
    CHECK(text.find("give the same problem flags") != std::string::npos);
}

TEST_CASE("a file that reports no size is read only up to the largest checkpoint") {
    // Files in /proc report 0 bytes whatever they hold; the read must stop past the limit all the same.
    const TemporaryFolder folder;
    fs::create_symlink("/proc/self/status", checkpoint_path(folder.str()));
    const std::string text = usage_error_text([&] { read_checkpoint(folder.str(), 100); });
    CHECK(text.find("is over 100 bytes, more than a checkpoint") != std::string::npos);
}

TEST_CASE("a checkpoint of more iterations than the run asks for is refused for --iterations, not for its size") {
    // 06 --resume DIR --iterations 5 of a run that wrote 1000: the file is whole, the run is too short.
    const TemporaryFolder folder;
    const Problem p = small_problem();
    write_checkpoint(folder.str(), sample_checkpoint(p, 1000));
    const Checkpoint read = read_small(folder.str());
    const std::string text = usage_error_text([&] { check_resume(read, checkpoint_path(folder.str()), p, 5, 3); });
    CHECK(text == "--iterations: the checkpoint already holds 1000 iterations; allowed 1001 or more to continue");
}

TEST_CASE("another problem's differences are listed printable and at most 8 of them") {
    const Problem p = small_problem();
    Checkpoint c = sample_checkpoint(p, 2);
    c.problem_text = "problem \x1b[31mred\n";
    for (int i = 0; i < 40; ++i) c.problem_text += "line " + std::to_string(i) + "\n";
    const std::string text = usage_error_text([&] { check_resume(c, "run/checkpoint.fwi", p, 10, 3); });
    CHECK(text.find("another problem") != std::string::npos);
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find("problem ?[31mred") != std::string::npos);
    CHECK(text.find("more)") != std::string::npos);
    CHECK(std::count(text.begin(), text.end(), '\n') == 9);  // 8 differences and the count of the rest
}

TEST_CASE("a whole checkpoint with values no run writes is refused, naming --resume") {
    // encode_checkpoint writes what it is given, with a valid checksum: the file another tool could make.
    const auto refusal = [](const std::function<void(Checkpoint&)>& change) {
        Checkpoint c = sample_checkpoint(small_problem(), 3);
        change(c);
        return usage_error_text([&] { decode_checkpoint(encode_checkpoint(c), "made.fwi"); });
    };
    CHECK(refusal([](Checkpoint&) {}) == "(no UsageError)");
    for (const int ranks : {0, -4}) {
        const std::string text = refusal([ranks](Checkpoint& c) { c.ranks = ranks; });
        CHECK(text.find("--resume") != std::string::npos);
        CHECK(text.find("rank count") != std::string::npos);
    }
    for (const double bad : {std::nan(""), -1.0, HUGE_VAL}) {
        CHECK(refusal([bad](Checkpoint& c) { c.state.misfits[1] = bad; }).find("loss history") != std::string::npos);
        CHECK(refusal([bad](Checkpoint& c) { c.state.iteration_seconds[2] = bad; }).find("loss history") !=
              std::string::npos);
    }
}

TEST_CASE("a whole checkpoint whose layout is wrong is refused, naming --resume") {
    const Checkpoint c = sample_checkpoint(small_problem(), 3);
    const std::string bytes = encode_checkpoint(c);
    const std::string body = bytes.substr(0, bytes.size() - sizeof(uint64_t));
    CHECK(decode_checkpoint(sealed(body), "made.fwi").state.iterations_done == 3);  // the helper seals as written
    const auto refusal = [](const std::string& file) {
        return usage_error_text([&] { decode_checkpoint(file, "made.fwi"); });
    };
    CHECK(refusal(sealed(body + "tail")).find("bytes after the last field") != std::string::npos);
    // The model's length (after the magic word, two int32 and the problem text with its length) says far
    // more floats than the file holds.
    const size_t model_length_at = 8 + 4 + 4 + 8 + c.problem_text.size();
    std::string longer = body;
    const uint64_t huge = uint64_t(1) << 61;
    std::memcpy(&longer[model_length_at], &huge, sizeof huge);
    CHECK(refusal(sealed(longer)).find("an array is longer than the file") != std::string::npos);
}

TEST_CASE("a loss history that does not match the iteration count is refused, naming --resume") {
    const auto refusal = [](const std::function<void(Checkpoint&)>& change) {
        Checkpoint c = sample_checkpoint(small_problem(), 3);
        change(c);
        return usage_error_text([&] { decode_checkpoint(encode_checkpoint(c), "made.fwi"); });
    };
    const std::string expected = "--resume: 'made.fwi' is not a usable checkpoint: its loss history does not match";
    CHECK(refusal([](Checkpoint& c) { c.state.misfits.pop_back(); }).find(expected) == 0);
    CHECK(refusal([](Checkpoint& c) { c.state.iteration_seconds.push_back(1.0); }).find(expected) == 0);
    CHECK(refusal([](Checkpoint& c) { c.state.iterations_done = 4; }).find(expected) == 0);
    CHECK(refusal([](Checkpoint& c) {
              c.state.iterations_done = -1;
              c.state.misfits.clear();
              c.state.iteration_seconds.clear();
          }).find(expected) == 0);
}

TEST_CASE("a checkpoint of no iteration, its arrays empty, is refused, naming --resume") {
    Checkpoint c = sample_checkpoint(small_problem(), 0);
    CHECK(usage_error_text([&] {
              decode_checkpoint(encode_checkpoint(c), "made.fwi");
          }).find("--resume: 'made.fwi' is not a usable checkpoint: it holds no iteration") == 0);
    c.state.velocity.clear();  // an empty model as well: read without touching the empty array's storage
    CHECK(usage_error_text([&] {
              decode_checkpoint(encode_checkpoint(c), "made.fwi");
          }).find("it holds no iteration") != std::string::npos);
}

TEST_CASE("resume: same problem continues, another problem or too few iterations are refused") {
    const Problem p = small_problem();
    const Checkpoint c = sample_checkpoint(p, 4);
    CHECK(check_resume(c, "run/checkpoint.fwi", p, 10, 3).empty());
    CHECK(check_resume(c, "run/checkpoint.fwi", p, 5, 3).empty());

    const std::string other_ranks = check_resume(c, "run/checkpoint.fwi", p, 10, 2);  // allowed, but not bit-identical
    CHECK(other_ranks.find("a run on 3 ranks, this one has 2") != std::string::npos);
    Checkpoint one_rank = c;
    one_rank.ranks = 1;
    CHECK(check_resume(one_rank, "run/checkpoint.fwi", p, 10, 2).find("a run on 1 rank, this one has 2") !=
          std::string::npos);

    const std::string done = usage_error_text([&] { check_resume(c, "run/checkpoint.fwi", p, 4, 3); });
    CHECK(done.find("--iterations") != std::string::npos);
    CHECK(done.find("5 or more") != std::string::npos);
    // At the most iterations a run can have, there is nothing to continue: no advice past the flag's range.
    const std::string complete = usage_error_text(
        [&] { check_resume(sample_checkpoint(p, kMaxIterations), "run/checkpoint.fwi", p, kMaxIterations, 3); });
    CHECK(complete.find("is complete") != std::string::npos);

    Problem other = p;
    other.step_size = 55.0;  // the small problem's is 40
    const std::string differs = usage_error_text([&] { check_resume(c, "run/checkpoint.fwi", other, 10, 3); });
    CHECK(differs.find("--resume") != std::string::npos);
    CHECK(differs.find("step_size 40") != std::string::npos);
    CHECK(differs.find("step_size 55") != std::string::npos);
    CHECK(differs.find("nz") == std::string::npos);  // only the values that differ are listed
}

TEST_CASE("the fingerprint tells every problem value apart") {
    const Problem p = small_problem();
    Problem changed = p;
    changed.mask_rows += 1;
    CHECK(problem_fingerprint(changed) != problem_fingerprint(p));
    changed = p;
    changed.gradient_depth_power = 1.0;
    CHECK(problem_fingerprint(changed) != problem_fingerprint(p));
    changed = p;
    changed.dt *= 1.0 + 1e-12;  // printed with 17 digits
    CHECK(problem_fingerprint(changed) != problem_fingerprint(p));
    CHECK(problem_fingerprint(problem_preset("small")) == problem_fingerprint(p));
}

TEST_CASE("loss history: CSV and JSON with one row per iteration") {
    const TemporaryFolder folder;
    FwiState state;
    state.iterations_done = 3;
    state.misfits = {8.0, 6.0, 2.0};
    state.iteration_seconds = {0.5, 0.25, 0.125};
    write_loss_history(folder.str(), state);
    const std::string csv = read_file(folder.str() + "/loss_history.csv");
    CHECK(csv.rfind("iteration,misfit,relative_misfit,iteration_seconds\n", 0) == 0);
    CHECK(csv.find("\n2,6.000000000e+00,0.750000000,0.250000\n") != std::string::npos);
    CHECK(csv.find("\n3,2.000000000e+00,0.250000000,0.125000\n") != std::string::npos);
    const std::string json = read_file(folder.str() + "/loss_history.json");
    CHECK(json ==
          "{\"iteration\": [1, 2, 3], \"misfit\": [8, 6, 2], \"relative_misfit\": [1, 0.75, 0.25], "
          "\"iteration_seconds\": [0.5, 0.25, 0.125]}\n");
    CHECK(snapshot_file_name(5) == "model_iter_0005.npy");
    // A checkpoint may hold any finite value: its rows are written whole, one a line, however long.
    state.misfits = {1e-300, 1.0};
    state.iteration_seconds = {1e300, 1.0};
    write_loss_history(folder.str(), state);
    const std::string long_rows = read_file(folder.str() + "/loss_history.csv");
    CHECK(std::count(long_rows.begin(), long_rows.end(), '\n') == 3);
    CHECK(long_rows.size() > 600);  // two numbers of 301 digits
    CHECK(long_rows.find("\n2,1.000000000e+00,") != std::string::npos);
    CHECK(long_rows.substr(long_rows.size() - 10) == ",1.000000\n");
}

TEST_CASE("a run's file names in its folder: the fixed ones, and the snapshots already there") {
    const TemporaryFolder folder;
    write_file(folder.str() + "/" + snapshot_file_name(5), "");
    write_file(folder.str() + "/model_iter_12345678901.npy", "");
    write_file(folder.str() + "/notes.txt", "");
    const std::vector<std::string> names = run_file_names(folder.str());
    for (const char* name : {"checkpoint.fwi", "final_model.npy", "loss_history.json", "model_iter_0005.npy",
                             "model_iter_12345678901.npy"}) {
        CAPTURE(name);
        CHECK(std::count(names.begin(), names.end(), name) == 1);
    }
    CHECK(std::count(names.begin(), names.end(), "notes.txt") == 0);
}

TEST_CASE("a run removes the snapshots after its start, and only those") {
    const TemporaryFolder folder;
    for (const std::string name : {"model_iter_0005.npy", "model_iter_0010.npy", "model_iter_0015.npy",
                                   "model_iter_99999999999.npy", "model_iter_0020.npy.bak", "final_model.npy"})
        std::ofstream(folder.str() + "/" + name) << "x";
    remove_snapshots_after(folder.str(), 10);  // a run resumed after iteration 10
    const auto exists = [&](const std::string& name) { return std::filesystem::exists(folder.str() + "/" + name); };
    CHECK(exists("model_iter_0005.npy"));
    CHECK(exists("model_iter_0010.npy"));
    CHECK_FALSE(exists("model_iter_0015.npy"));
    CHECK_FALSE(exists("model_iter_99999999999.npy"));
    CHECK(exists("model_iter_0020.npy.bak"));  // not a name the run writes
    CHECK(exists("final_model.npy"));
    remove_snapshots_after(folder.str(), 0);  // a fresh run
    CHECK_FALSE(exists("model_iter_0005.npy"));
    CHECK(exists("final_model.npy"));
}

TEST_CASE("pictures: the plotting script runs on a run folder; a missing script is a warning, not an error") {
    const TemporaryFolder folder;
    const Problem p = small_problem();
    write_model_npy(p, folder.str(), "initial_model.npy", initial_model(p));
    write_model_npy(p, folder.str(), "true_model.npy", true_model(p));
    write_model_npy(p, folder.str(), "final_model.npy", true_model(p));
    CHECK(draw_pictures(FWI_PLOT_SCRIPT, folder.str(), kPicturesTimeoutSeconds));  // with or without matplotlib
    CHECK_FALSE(draw_pictures(folder.str() + "/no_such_script.py", folder.str(), kPicturesTimeoutSeconds));
}

TEST_CASE("pictures: a run folder named like a flag reaches the script as a folder, not as the flag") {
    const TemporaryFolder folder;
    const std::string script = folder.str() + "/records.py", record = folder.str() + "/argument";
    std::ofstream(script) << "import sys\nopen('" + record + "', 'w').write(sys.argv[1])\n";
    CHECK(draw_pictures(script, "--help", kPicturesTimeoutSeconds));
    CHECK(read_file(record) == "./--help");
    CHECK(draw_pictures(script, "run-1", kPicturesTimeoutSeconds));
    CHECK(read_file(record) == "run-1");
}

TEST_CASE("pictures: a plotting script that never ends is stopped at the time limit") {
    const TemporaryFolder folder;
    const std::string script = folder.str() + "/sleeps.py";
    std::ofstream(script) << "import time\ntime.sleep(60)\n";
    const auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(draw_pictures(script, folder.str(), 1.0));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}
