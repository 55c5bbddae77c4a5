// Machine-readable output: the `RESULT {json}` line (and --json FILE), and .npy arrays.
//
// The fields of every kind of RESULT, their types and units, and how the schema version changes are in
// docs/RESULT.md; scripts/result_schema.py holds the same schema as data and checks RESULT lines against it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fwi {

struct Problem;

// The version of the RESULT schema that emit_result writes as "schema_version" (docs/RESULT.md).
constexpr int kResultSchemaVersion = 2;

class JsonArray;
class JsonObject;

// One JSON value, encoded when it is made. Every type a RESULT needs converts to it implicitly, so
// JsonObject::add and JsonArray::add take any of them:
//   integers of any width, exactly (byte counts are never rounded); doubles in the shortest text that
//   reads back as the same double, NaN and infinities as null (JSON has neither); bool; strings;
//   JsonObject and JsonArray; std::vector of any of these as an array; nullptr as null, and
//   std::optional as its value or null.
class JsonValue {
public:
    JsonValue(std::nullptr_t) : text_("null") {}
    JsonValue(bool value) : text_(value ? "true" : "false") {}
    JsonValue(double value);
    template <typename Integer,
              std::enable_if_t<std::is_integral_v<Integer> && !std::is_same_v<Integer, bool>, int> = 0>
    JsonValue(Integer value) : text_(std::to_string(value)) {}
    JsonValue(const char* text) : JsonValue(std::string(text)) {}
    JsonValue(const std::string& text);
    JsonValue(const JsonObject& object);
    JsonValue(const JsonArray& array);
    template <typename T>
    JsonValue(const std::vector<T>& values);
    template <typename T>
    JsonValue(const std::optional<T>& value) : JsonValue(value ? JsonValue(*value) : JsonValue(nullptr)) {}

    const std::string& str() const { return text_; }

private:
    std::string text_;
};

// A JSON array built element by element: JsonArray().add(1).add("two").
class JsonArray {
public:
    JsonArray& add(const JsonValue& value);
    std::string str() const;

private:
    std::vector<std::string> items_;  // encoded values
};

// A JSON object built field by field, in insertion order: JsonObject().add("bytes", n).add("ok", true).
class JsonObject {
public:
    JsonObject& add(const std::string& key, const JsonValue& value);
    // Adds every field of `other`, in its order.
    JsonObject& append(const JsonObject& other);
    std::string str() const;

private:
    std::vector<std::pair<std::string, std::string>> fields_;  // key, encoded value
};

template <typename T>
JsonValue::JsonValue(const std::vector<T>& values) {
    JsonArray array;
    for (const auto& value : values) array.add(value);
    text_ = array.str();
}

std::string json_quote(const std::string& text);

// A memory size as people read it: "1.5 GiB", "512 MiB", "64 KiB".
std::string size_text(double bytes);

// The parts in order with `separator` between them ("a, b, c"); "" for none.
std::string join(const std::vector<std::string>& parts, const std::string& separator);

// Prints `RESULT {json}` on stdout and, when json_path is not empty, writes the same object to that file
// (atomically, as write_file_atomically). The object written is
// {"schema_version": kResultSchemaVersion, <the fields of result>, "env": run_env_json()} (run_env.hpp):
// callers add neither of the two.
void emit_result(const JsonObject& result, const std::string& json_path);
// Writes `json` and a newline to the --json file PATH, atomically (write_file_atomically); a failure is an
// EnvironmentError naming --json (exit 3: a full disk, a folder removed during the run). Check PATH with
// check_writable before the run: a path that could never be written is the user's to mend (exit 2).
void write_json_file(const std::string& path, const std::string& json);

// Writes a C-order float32 array as a NumPy .npy file (format version 1.0), atomically. Throws on I/O failure.
void write_npy(const std::string& path, const float* data, const std::vector<size_t>& shape);

// An nz x nx array of `problem` (a model or a gradient) as DIR/NAME, NAME ending in .npy.
void write_model_npy(const Problem& problem, const std::string& dir, const std::string& name,
                     const std::vector<float>& values);

// Every file the suite writes goes through this: the bytes go to a temporary file of a unique name in
// the same folder (PATH.tmp.PID.N), which is fsynced and renamed over PATH, and the folder is fsynced.
// A process killed at any moment leaves PATH as its previous whole version or the new whole one, never
// torn (at worst a stray PATH.tmp.* file, which the next write of PATH removes). Throws EnvironmentError
// naming PATH. A write that has not finished after 2 minutes (and a second for every 10 MB) ends the
// process with exit 3, naming PATH and a stalled file system (end_process_if_late).
void write_file_atomically(const std::string& path, const std::string& bytes);
// PATH.tmp.PID.N: unique among processes (PID) and among the threads and calls of one (N, 8 hex digits,
// so that every temporary of a process has the same length), so two writers never share a temporary
// file, and a stray one left by a killed run names the run. For a
// writer that is not write_file_atomically (Google Benchmark's --benchmark_out).
std::string temporary_name(const std::string& path);

// Refuses, before a run spends any time, an output file it could not write at its end: throws UsageError
// naming `flag` unless PATH's folder exists and a file can be created in it (what write_file_atomically
// needs) and PATH is missing or a regular file (not a folder, a symbolic link, a device, a FIFO or a
// socket, which the rename would replace). An empty PATH (the flag not given) passes.
void check_writable(const std::string& path, const std::string& flag);
// Refuses, before a run spends any time, a run whose folder FOLDER (given by `flag`) holds something under
// one of the `names` the run writes there that its end could not replace (what check_writable refuses: a
// folder, a symbolic link, a device, a FIFO or a socket); a missing name or a regular file passes.
void check_run_files_replaceable(const std::string& folder, const std::vector<std::string>& names,
                                 const std::string& flag);
// Throws UsageError naming `flag` when the file PATH could be one of the files an FWI run keeps in its
// folder FOLDER (given by `folder_flag`: --out, or --resume's folder): PATH directly in FOLDER with the name
// of such a file, which one would replace the other. Those are `run_files` where given (a run that writes
// only those), else 06's: loss_history.json, and any .npy, .csv, .png or .fwi file (its snapshots are
// numbered). Another name there ("result.json") passes, as do an empty PATH or FOLDER. Call it once both
// folders exist: after check_writable(PATH) and OutputFolder(--out), or once --resume's was read.
void check_not_a_run_file(const std::string& path, const std::string& flag, const std::string& folder,
                          const std::string& folder_flag, const std::vector<std::string>& run_files = {});

// The --out folder: created with its missing parents, and removed again, with the parents it made, unless
// keep() is called: a run refused after it (a bad --json, no GPU) leaves no folder behind. Only empty
// folders are removed, so nothing a run wrote is lost. Throws UsageError if the folder cannot be created,
// or if no file can be created in it (permissions, a read-only file system, a path so long that the
// run's longest file name would not fit): refused before the run, not after it.
// The name the check creates (and removes), longer than any a run writes into --out (observed_gathers.npy,
// 20 characters; model_iter_100000.npy, 21, at the most iterations).
constexpr const char* kOutputFolderProbe = "write-test-of-the-longest.npy";
class OutputFolder {
public:
    explicit OutputFolder(const std::string& path);
    ~OutputFolder() { remove_created(); }
    OutputFolder(const OutputFolder&) = delete;
    OutputFolder& operator=(const OutputFolder&) = delete;
    void keep() { created_.clear(); }

private:
    void remove_created();
    std::vector<std::string> created_;  // the folders it made, deepest first
};

// The first line of a text file (a /proc or /sys entry), without its newline; "" when it cannot be read.
std::string first_line_of(const std::string& path);

}  // namespace fwi
