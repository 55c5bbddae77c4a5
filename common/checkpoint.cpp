#include "checkpoint.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "errors.hpp"
#include "fnv1a.hpp"
#include "model_checks.hpp"
#include "output.hpp"

namespace fwi {

namespace {

constexpr char kMagic[8] = {'F', 'W', 'I', 'C', 'K', 'P', 'T', '1'};

class ByteWriter {
public:
    template <typename T>
    void put(const T& value) {
        bytes_.append(reinterpret_cast<const char*>(&value), sizeof value);
    }
    template <typename T>
    void put_array(const std::vector<T>& values) {
        put<uint64_t>(values.size());
        bytes_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
    }
    void put_text(const std::string& text) {
        put<uint64_t>(text.size());
        bytes_ += text;
    }
    std::string& bytes() { return bytes_; }

private:
    std::string bytes_;
};

class ByteReader {
public:
    ByteReader(const std::string& bytes, size_t end, std::string source)
        : bytes_(bytes), end_(end), source_(std::move(source)) {}

    template <typename T>
    T get() {
        T value;
        std::memcpy(&value, take(sizeof value), sizeof value);
        return value;
    }
    template <typename T>
    std::vector<T> get_array() {
        const uint64_t count = get<uint64_t>();
        if (count > (end_ - position_) / sizeof(T)) fail("an array is longer than the file");
        std::vector<T> values(count);
        if (count > 0) std::memcpy(values.data(), take(count * sizeof(T)), count * sizeof(T));  // data() may be null
        return values;
    }
    std::string get_text() {
        const uint64_t size = get<uint64_t>();
        if (size > end_ - position_) fail("a text is longer than the file");
        return std::string(take(size), size);
    }
    void skip(size_t size) { take(size); }
    bool at_end() const { return position_ == end_; }
    [[noreturn]] void fail(const std::string& why) const {
        throw UsageError("--resume: '" + shown_path(source_) + "' is not a usable checkpoint: " + why);
    }

private:
    const char* take(size_t size) {
        if (size > end_ - position_) fail("it ends early");
        const char* data = bytes_.data() + position_;
        position_ += size;
        return data;
    }
    const std::string& bytes_;
    size_t end_;
    size_t position_ = 0;
    std::string source_;
};

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream stream(text);
    for (std::string line; std::getline(stream, line);) lines.push_back(line);
    return lines;
}

}  // namespace

std::string checkpoint_path(const std::string& dir) { return dir + "/" + kCheckpointFileName; }

std::string problem_fingerprint(const Problem& p) {
    std::ostringstream text;
    text.precision(17);
    text << "problem " << p.name << "\nnz " << p.nz << "\nnx " << p.nx << "\ndh " << p.dh << "\ndt " << p.dt << "\nnt "
         << p.nt << "\nabsorb_width " << p.absorb_width << "\nfreq " << p.freq << "\ndelay " << p.delay << "\nnshots "
         << p.nshots << "\nsrc_depth " << p.src_depth << "\nsrc_x_first " << p.src_x_first << "\nsrc_x_last "
         << p.src_x_last << "\nnrec " << p.nrec << "\nrec_depth " << p.rec_depth << "\nrec_x_first " << p.rec_x_first
         << "\nrec_x_last " << p.rec_x_last << "\nmodel " << p.model << "\nv_top " << p.v_top << "\nv_bottom "
         << p.v_bottom << "\ninterface_depth " << p.interface_depth << "\nanomaly_dv " << p.anomaly_dv
         << "\nanomaly_radius " << p.anomaly_radius << "\nv_initial " << p.v_initial << "\nv_min " << p.v_min
         << "\nv_max " << p.v_max << "\nstep_size " << p.step_size << "\nmask_rows " << p.mask_rows
         << "\ngradient_depth_power " << p.gradient_depth_power << "\n";
    return text.str();
}

std::string encode_checkpoint(const Checkpoint& checkpoint) {
    ByteWriter out;
    out.bytes().append(kMagic, sizeof kMagic);
    out.put<int32_t>(checkpoint.state.iterations_done);
    out.put<int32_t>(checkpoint.ranks);
    out.put_text(checkpoint.problem_text);
    out.put_array(checkpoint.state.velocity);
    out.put_array(checkpoint.state.misfits);
    out.put_array(checkpoint.state.iteration_seconds);
    out.put<uint64_t>(fnv1a(out.bytes().data(), out.bytes().size()));
    return out.bytes();
}

Checkpoint decode_checkpoint(const std::string& bytes, const std::string& source) {
    const size_t body = bytes.size() >= sizeof(uint64_t) ? bytes.size() - sizeof(uint64_t) : 0;
    ByteReader in(bytes, body, source);
    if (body < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
        in.fail("it does not start with the checkpoint magic word");
    uint64_t stored_checksum;
    std::memcpy(&stored_checksum, bytes.data() + body, sizeof stored_checksum);
    if (stored_checksum != fnv1a(bytes.data(), body)) in.fail("its checksum does not match (damaged or torn)");

    in.skip(sizeof kMagic);
    Checkpoint checkpoint;
    checkpoint.state.iterations_done = in.get<int32_t>();
    checkpoint.ranks = in.get<int32_t>();
    checkpoint.problem_text = in.get_text();
    checkpoint.state.velocity = in.get_array<float>();
    checkpoint.state.misfits = in.get_array<double>();
    checkpoint.state.iteration_seconds = in.get_array<double>();
    if (!in.at_end()) in.fail("it has bytes after the last field");
    const size_t done = static_cast<size_t>(checkpoint.state.iterations_done);
    if (checkpoint.state.iterations_done < 0 || checkpoint.state.misfits.size() != done ||
        checkpoint.state.iteration_seconds.size() != done)
        in.fail("its loss history does not match its iteration count");
    // A run writes its first checkpoint after its first iteration at the earliest.
    if (done == 0) in.fail("it holds no iteration");
    // A whole file can still hold values no run writes (another tool's, or a diverged run's loss).
    if (checkpoint.ranks < 1) in.fail("its rank count " + std::to_string(checkpoint.ranks) + " is not positive");
    const auto finite_and_not_negative = [](double value) { return std::isfinite(value) && value >= 0.0; };
    for (const std::vector<double>* history : {&checkpoint.state.misfits, &checkpoint.state.iteration_seconds})
        if (!std::all_of(history->begin(), history->end(), finite_and_not_negative))
            in.fail("its loss history holds a value that is negative or not a finite number");
    return checkpoint;
}

void write_checkpoint(const std::string& dir, const Checkpoint& checkpoint) {
    write_file_atomically(checkpoint_path(dir), encode_checkpoint(checkpoint));
}

size_t largest_checkpoint_bytes(const Problem& problem) {
    // An empty checkpoint's encoding (with room for a longer problem text), plus the model and the two
    // histories: the format is written down once, in encode_checkpoint.
    constexpr size_t kTextSpare = 4096;
    Checkpoint empty;
    empty.problem_text = problem_fingerprint(problem) + std::string(kTextSpare, ' ');
    return encode_checkpoint(empty).size() + sizeof(float) * problem.model_cells() +
           2 * sizeof(double) * size_t(kMaxIterations);
}

Checkpoint read_checkpoint(const std::string& dir, size_t max_bytes) {
    const std::string path = checkpoint_path(dir);
    std::error_code ignored;
    if (std::filesystem::is_regular_file(dir, ignored))
        throw UsageError("--resume: '" + shown_path(dir) +
                         "' is a file; --resume takes the folder that holds the checkpoint (the run's --out folder)");
    if (std::filesystem::exists(dir, ignored) && !std::filesystem::is_directory(dir, ignored))
        throw UsageError("--resume: '" + shown_path(dir) +
                         "' is not a folder; --resume takes the folder that holds the checkpoint (the run's --out "
                         "folder)");
    // A file that is there but cannot be opened (no permission, a loop of links) is not "no checkpoint".
    std::error_code lookup_error;
    const bool exists = std::filesystem::exists(path, lookup_error);
    if (exists && !std::filesystem::is_regular_file(path, ignored))
        throw UsageError("--resume: '" + shown_path(path) +
                         "' is not a regular file (a folder, a pipe or a device is no checkpoint)");
    errno = 0;
    std::ifstream file(path, std::ios::binary);
    if (!file && !exists && !lookup_error)
        throw UsageError("--resume: no checkpoint '" + shown_path(path) + "' (write one with --checkpoint-every)");
    if (!file)
        throw UsageError("--resume: cannot read the checkpoint '" + shown_path(path) + "': " +
                         (lookup_error ? lookup_error.message()
                          : errno      ? std::strerror(errno)
                                       : "the open failed"));
    const auto too_large = [&](const std::string& size) {
        return UsageError("--resume: '" + shown_path(path) + "' is " + size +
                          " bytes, more than a checkpoint of this run's problem can be (at most " +
                          std::to_string(max_bytes) +
                          " bytes: the model, the loss history and the problem's values); if it was written for a "
                          "larger grid, give the same problem flags as the run that wrote it");
    };
    const uintmax_t size = std::filesystem::file_size(path, ignored);
    if (size != static_cast<uintmax_t>(-1) && size > max_bytes) throw too_large(std::to_string(size));
    // Read at most max_bytes + 1 bytes, whatever the size said: some files (in /proc, for one) report 0.
    std::string bytes;
    std::vector<char> chunk(size_t(1) << 20);
    for (;;) {
        const size_t left = max_bytes - bytes.size();  // bytes.size() <= max_bytes here; max_bytes may be SIZE_MAX
        const size_t wanted = left < chunk.size() ? left + 1 : chunk.size();
        file.read(chunk.data(), std::streamsize(wanted));
        if (file.gcount() == 0) break;
        bytes.append(chunk.data(), size_t(file.gcount()));
        if (bytes.size() > max_bytes) throw too_large("over " + std::to_string(max_bytes));
    }
    return decode_checkpoint(bytes, path);
}

std::string check_resume(const Checkpoint& checkpoint, const std::string& path, const Problem& problem, int iterations,
                         int ranks) {
    const std::string expected = problem_fingerprint(problem);
    if (checkpoint.problem_text != expected) {
        const std::vector<std::string> theirs = lines_of(checkpoint.problem_text), ours = lines_of(expected);
        // The file's text is shown printable and at most kShown lines of it: it may be another tool's.
        constexpr int kShown = 8;
        const auto printable = [](std::string line) {
            for (char& c : line)
                if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
            return line.size() > 100 ? line.substr(0, 100) + "..." : line;
        };
        std::string differences;
        int found = 0;
        for (size_t i = 0; i < std::max(theirs.size(), ours.size()); ++i) {
            const std::string a = i < theirs.size() ? theirs[i] : "(none)", b = i < ours.size() ? ours[i] : "(none)";
            if (a != b && ++found <= kShown) differences += "\n  checkpoint: " + printable(a) + "  |  this run: " + b;
        }
        if (found > kShown) differences += "\n  (and " + std::to_string(found - kShown) + " more)";
        throw UsageError(
            "--resume: the checkpoint '" + shown_path(path) +
            "' belongs to another problem; give the same problem flags as the run that wrote it. Differences:" +
            differences);
    }
    // The checksum proves the bytes are the ones written, not that the model in them is one a run can
    // continue from (a diverged run, a file made by another tool).
    check_model(problem, checkpoint.state.velocity, "--resume: the model in '" + shown_path(path) + "'");
    if (checkpoint.state.iterations_done >= kMaxIterations)
        throw UsageError("--resume: the checkpoint '" + shown_path(path) + "' already holds " +
                         std::to_string(checkpoint.state.iterations_done) +
                         " iterations, the most --iterations allows: the run it belongs to is complete");
    if (checkpoint.state.iterations_done >= iterations)
        throw UsageError("--iterations: the checkpoint already holds " +
                         std::to_string(checkpoint.state.iterations_done) + " iterations; allowed " +
                         std::to_string(checkpoint.state.iterations_done + 1) + " or more to continue");
    if (checkpoint.ranks != ranks)
        return "the checkpoint was written by a run on " + count_of(checkpoint.ranks, "rank") + ", this one has " +
               std::to_string(ranks) +
               ": it continues correctly, but the gradient sums are taken in another order, so the result differs from "
               "an uninterrupted run in float rounding";
    return "";
}

}  // namespace fwi
