#include "output.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "errors.hpp"
#include "problem.hpp"
#include "run_env.hpp"

namespace fwi {

namespace {
// The length of the well-formed UTF-8 sequence that starts at text[i] (1 to 4 bytes), 0 if none does:
// a stray continuation byte, a truncated sequence, an overlong form, a surrogate or a code point past
// U+10FFFF.
size_t utf8_sequence_length(const std::string& text, size_t i) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    if (lead < 0x80) return 1;
    const size_t length = lead >= 0xC2 && lead <= 0xDF   ? 2
                          : lead >= 0xE0 && lead <= 0xEF ? 3
                          : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                         : 0;
    if (length == 0 || i + length > text.size()) return 0;
    for (size_t k = 1; k < length; ++k)
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
    const unsigned char second = byte(i + 1);
    if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) || (lead == 0xF0 && second < 0x90) ||
        (lead == 0xF4 && second > 0x8F))
        return 0;
    return length;
}
}  // namespace

// JSON text must be UTF-8 (RFC 8259): a byte that is not part of a well-formed sequence (an environment
// variable can hold anything) becomes U+FFFD, so the file always loads.
std::string json_quote(const std::string& text) {
    std::string out = "\"";
    for (size_t i = 0; i < text.size(); ++i) {
        const char ch = text[i];
        if (static_cast<unsigned char>(ch) >= 0x80) {
            const size_t length = utf8_sequence_length(text, i);
            if (length == 0) {
                out += "\\ufffd";
            } else {
                out.append(text, i, length);
                i += length - 1;
            }
            continue;
        }
        switch (ch) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(ch) < 0x20) {
                    char code[8];
                    std::snprintf(code, sizeof code, "\\u%04x", ch);
                    out += code;
                } else {
                    out += ch;
                }
        }
    }
    return out + "\"";
}

JsonValue::JsonValue(double value) {
    // JSON has no NaN or infinity; null says "no value" honestly.
    if (!std::isfinite(value)) {
        text_ = "null";
        return;
    }
    // The shortest text that reads back as exactly this double: no figure is rounded on its way to a
    // script, and 0.1 stays "0.1" (which %.17g would write as 0.10000000000000001).
    char text[32];
    const std::to_chars_result written = std::to_chars(text, text + sizeof text, value);
    text_.assign(text, written.ptr);
}

JsonValue::JsonValue(const std::string& text) : text_(json_quote(text)) {}

JsonValue::JsonValue(const JsonObject& object) : text_(object.str()) {}

JsonValue::JsonValue(const JsonArray& array) : text_(array.str()) {}

JsonArray& JsonArray::add(const JsonValue& value) {
    items_.push_back(value.str());
    return *this;
}

std::string JsonArray::str() const {
    std::string out = "[";
    for (size_t i = 0; i < items_.size(); ++i) {
        if (i) out += ", ";
        out += items_[i];
    }
    return out + "]";
}

JsonObject& JsonObject::add(const std::string& key, const JsonValue& value) {
    fields_.emplace_back(key, value.str());
    return *this;
}

JsonObject& JsonObject::append(const JsonObject& other) {
    fields_.insert(fields_.end(), other.fields_.begin(), other.fields_.end());
    return *this;
}

std::string JsonObject::str() const {
    std::string out = "{";
    for (size_t i = 0; i < fields_.size(); ++i) {
        if (i) out += ", ";
        out += json_quote(fields_[i].first) + ": " + fields_[i].second;
    }
    return out + "}";
}

void emit_result(const JsonObject& result, const std::string& json_path) {
    JsonObject versioned;
    versioned.add("schema_version", kResultSchemaVersion).append(result).add("env", run_env_json());
    const std::string text = versioned.str();
    std::printf("RESULT %s\n", text.c_str());
    std::fflush(stdout);
    if (!json_path.empty()) write_json_file(json_path, text);
}

void write_json_file(const std::string& path, const std::string& json) {
    try {
        write_file_atomically(path, json + "\n");
    } catch (const EnvironmentError& error) {
        throw EnvironmentError(std::string("--json: ") + error.what());
    }
}

void write_npy(const std::string& path, const float* data, const std::vector<size_t>& shape) {
    // Python tuple syntax: (n,) for one dimension, (a, b) for more.
    std::ostringstream shape_text;
    shape_text << "(";
    size_t count = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
        shape_text << (d ? ", " : "") << shape[d];
        count *= shape[d];
    }
    shape_text << (shape.size() == 1 ? ",)" : ")");
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text.str() + ", }";
    // The magic (6) + version (2) + header length (2) + header + newline is padded to a multiple of 64.
    const size_t unpadded = 10 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';

    const uint16_t header_length = static_cast<uint16_t>(header.size());
    std::string bytes = {'\x93',
                         'N',
                         'U',
                         'M',
                         'P',
                         'Y',
                         1,
                         0,
                         static_cast<char>(header_length & 0xff),
                         static_cast<char>(header_length >> 8)};
    bytes += header;
    bytes.append(reinterpret_cast<const char*>(data), count * sizeof(float));
    write_file_atomically(path, bytes);
}

void write_model_npy(const Problem& problem, const std::string& dir, const std::string& name,
                     const std::vector<float>& values) {
    write_npy(dir + "/" + name, values.data(), {size_t(problem.nz), size_t(problem.nx)});
}

namespace {

[[noreturn]] void throw_write_error(const std::string& what, const std::string& path, int error) {
    throw EnvironmentError("cannot " + what + " '" + shown_path(path) + "': " + std::strerror(error) +
                           " (check the folder's free space and permissions)");
}

std::string folder_of(const std::string& path) {
    const std::string parent = std::filesystem::path(path).parent_path().string();
    return parent.empty() ? "." : parent;
}

// A run killed while writing leaves its temporary file behind; the next write of the same file removes
// it: PATH.tmp.PID.N of a process that no longer exists. Never another name (a user's PATH.tmp stays),
// nor a live writer's file.
void remove_stale_temporaries(const std::string& path) {
    const std::filesystem::path target(path);
    const std::string prefix = target.filename().string() + ".tmp.";
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(folder_of(path), error)) {
        const std::string name = entry.path().filename().string();
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        // PID.N: N in 8 hex digits (temporary_name), or in decimal as earlier versions wrote it.
        unsigned long pid = 0;
        int n_at = 0;
        const bool pid_read = std::sscanf(name.c_str() + prefix.size(), "%lu.%n", &pid, &n_at) == 1 && n_at > 0;
        const std::string n = pid_read ? name.substr(prefix.size() + size_t(n_at)) : "";
        const bool decimal = !n.empty() && n.find_first_not_of("0123456789") == std::string::npos;
        const bool hex = n.size() == 8 && n.find_first_not_of("0123456789abcdef") == std::string::npos;
        const bool ours = pid_read && pid > 0 && (decimal || hex);
        if (ours && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
            std::filesystem::remove(entry.path(), error);
    }
}

}  // namespace

std::string temporary_name(const std::string& path) {
    static std::atomic<unsigned long> counter{0};
    // N in 8 hex digits: every temporary of the process has the same length as the one that the check
    // of an output path (check_writable) tried, so a name that passed is never one character too long.
    char suffix[48];
    std::snprintf(suffix, sizeof suffix, ".tmp.%ld.%08lx", long(::getpid()), counter++ & 0xffffffffUL);
    return path + suffix;
}

namespace {

// How long one file may take (its bytes, fsync and rename): 2 minutes, and a second more for every 10 MB.
// Only a file system that stalls (a network mount whose server went away) comes near it, and without a
// limit it would hold the program forever. (Its test shortens the 2 minutes: file_write_base_seconds.)
double file_write_limit_seconds(size_t bytes) { return file_write_base_seconds() + double(bytes) / 10e6; }

void write_file_atomically_unlimited(const std::string& path, const std::string& bytes) {
    const std::string temporary = temporary_name(path);
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) throw_write_error("create", temporary, errno);
    // Anything that fails before the rename leaves the old PATH as it was and removes our temporary.
    const auto fail = [&](const char* what) {
        const int error = errno;
        ::close(fd);
        ::unlink(temporary.c_str());
        throw_write_error(what, temporary, error);
    };
    for (size_t written = 0; written < bytes.size();) {
        const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("write");
        written += static_cast<size_t>(n);
    }
    // The data must be on disk before the rename is: otherwise a crash can leave the new name on an
    // empty or partial file.
    if (::fsync(fd) != 0) fail("fsync");
    if (::close(fd) != 0) {
        const int error = errno;
        ::unlink(temporary.c_str());
        throw_write_error("close", temporary, error);
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
        const int error = errno;
        ::unlink(temporary.c_str());
        throw_write_error("rename into place", path, error);
    }
    // The folder's fsync makes the rename itself durable.
    const std::string folder = folder_of(path);
    const int folder_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder_fd < 0) throw_write_error("open", folder, errno);
    const int status = ::fsync(folder_fd);
    const int error = errno;
    ::close(folder_fd);
    if (status != 0) throw_write_error("fsync", folder, error);
    remove_stale_temporaries(path);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes) {
    const double limit_s = file_write_limit_seconds(bytes.size());
    end_process_if_late(limit_s,
                        std::string(running_program_name()) + ": environment: writing '" + shown_path(path) +
                            "' did not finish within " + format_seconds(limit_s) +
                            " s: the file system is stalled or very slow; ending the process\n",
                        [&] { write_file_atomically_unlimited(path, bytes); });
}

namespace {
// "" when a file can be created in the folder of `path` where write_file_atomically would create its
// temporary, else why not. Creating and removing one is the one test that covers permissions, read-only
// file systems and ACLs alike.
std::string cannot_create_beside(const std::string& path) {
    const std::string probe = temporary_name(path);
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return std::string("cannot create a file in '") + shown_path(folder_of(path)) + "': " + std::strerror(errno);
    ::close(fd);
    ::unlink(probe.c_str());
    return "";
}

// What a path of this type (its symlink_status) is, where write_file_atomically must not replace it; ""
// where it may. The file is renamed over the path, which replaces whatever is there: a device (/dev/null),
// a FIFO or a socket would become a plain file, and a symbolic link would be replaced instead of its target
// written. So the path must be missing or a regular file; a link is refused, not followed. A folder stops
// the rename at the end of the run.
std::string unreplaceable_kind(std::filesystem::file_type type) {
    namespace fs = std::filesystem;
    switch (type) {
        case fs::file_type::directory:
            return "it is a folder";
        case fs::file_type::symlink:
            return "it is a symbolic link";
        case fs::file_type::character:
        case fs::file_type::block:
        case fs::file_type::fifo:
        case fs::file_type::socket:
            return "it is not a regular file (a device, a FIFO or a socket)";
        default:
            return "";
    }
}
}  // namespace

void check_writable(const std::string& path, const std::string& flag) {
    if (path.empty()) return;
    const auto refuse = [&](const std::string& why) {
        throw UsageError(flag + ": cannot write '" + shown_path(path) + "': " + why);
    };
    namespace fs = std::filesystem;
    std::error_code ignored;
    const fs::file_type type = fs::symlink_status(path, ignored).type();
    if (const std::string kind = unreplaceable_kind(type); !kind.empty())
        refuse(kind + (type == fs::file_type::directory ? "; give a file name"
                       : type == fs::file_type::symlink ? "; give the file it points to"
                                                        : ", and the file written would replace it"));
    const std::string folder = folder_of(path);
    if (!fs::is_directory(folder, ignored))
        refuse(fs::exists(folder, ignored) ? "'" + shown_path(folder) + "' is a file, not a folder"
                                           : "the folder '" + shown_path(folder) + "' does not exist");
    if (const std::string why = cannot_create_beside(path); !why.empty()) refuse(why);
}

void check_run_files_replaceable(const std::string& folder, const std::vector<std::string>& names,
                                 const std::string& flag) {
    for (const std::string& name : names) {
        const std::string path = folder + "/" + name;
        std::error_code ignored;
        if (const std::string kind = unreplaceable_kind(std::filesystem::symlink_status(path, ignored).type());
            !kind.empty())
            throw UsageError(flag + ": '" + shown_path(path) + "': " + kind +
                             ", and the run writes (or removes) its own " + name +
                             " there; move it away or choose another " + flag);
    }
}

void check_not_a_run_file(const std::string& path, const std::string& flag, const std::string& folder,
                          const std::string& folder_flag, const std::vector<std::string>& run_files) {
    if (path.empty() || folder.empty()) return;
    namespace fs = std::filesystem;
    const fs::path name = fs::path(path).filename();
    const std::string extension = name.extension().string();
    const bool run_file_name = run_files.empty()
                                   ? name == "loss_history.json" || extension == ".npy" || extension == ".csv" ||
                                         extension == ".png" || extension == ".fwi"
                                   : std::find(run_files.begin(), run_files.end(), name.string()) != run_files.end();
    if (!run_file_name) return;
    const std::string which = run_files.empty() ? "models .npy, the loss history .csv and loss_history.json, "
                                                  "pictures .png, the checkpoint .fwi"
                                                : join(run_files, ", ");
    // The same folder is the same inode ("out/.", "./out" and links included); both exist by now.
    std::error_code ignored;
    if (fs::equivalent(folder_of(path), folder, ignored))
        throw UsageError(flag + ": '" + shown_path(path) +
                         "' could replace one of the run's own files in the folder of " + folder_flag + " (" +
                         shown_path(folder) + ": " + which + "); give it another name or folder");
}

OutputFolder::OutputFolder(const std::string& path) {
    namespace fs = std::filesystem;
    // The folders that are not there yet, deepest first, walking the path as given: nothing that exists,
    // a dangling symbolic link included, and no "." or "..".
    std::vector<fs::path> missing;
    std::error_code ignored, error;
    for (fs::path folder = path; !folder.empty();) {
        const fs::path parent = folder.parent_path();
        if (folder.has_filename()) {  // "out/" names "out", its parent
            if (fs::symlink_status(folder, ignored).type() != fs::file_type::not_found) break;
            if (folder.filename() != "." && folder.filename() != "..") missing.push_back(folder);
        }
        if (parent == folder) break;  // the root
        folder = parent;
    }
    fs::create_directories(path, error);
    // Only what is now a folder of its own was made here.
    for (const fs::path& folder : missing)
        if (fs::symlink_status(folder, ignored).type() == fs::file_type::directory) created_.push_back(folder.string());
    std::string why = error ? "cannot create directory '" + shown_path(path) + "': " + error.message()
                            : cannot_create_beside(path + "/" + kOutputFolderProbe);
    if (!why.empty()) {
        remove_created();  // the destructor does not run for a constructor that throws
        throw UsageError("--out: " + why);
    }
}

void OutputFolder::remove_created() {
    std::error_code ignored;  // a folder no longer empty stays
    for (const std::string& folder : created_) std::filesystem::remove(folder, ignored);
    created_.clear();
}

std::string first_line_of(const std::string& path) {
    std::ifstream file(path);
    std::string line;
    std::getline(file, line);
    return line;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
    std::string text;
    for (const auto& part : parts) text += (text.empty() ? "" : separator) + part;
    return text;
}

std::string size_text(double bytes) {
    constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
    char text[32];
    if (bytes >= kGiB)
        std::snprintf(text, sizeof text, "%.1f GiB", bytes / kGiB);
    else if (bytes >= kMiB)
        std::snprintf(text, sizeof text, "%.0f MiB", bytes / kMiB);
    else
        std::snprintf(text, sizeof text, "%.0f KiB", bytes / kKiB);
    return text;
}

}  // namespace fwi
