// Machine-readable output: the `RESULT {json}` line (and --json FILE), and .npy arrays.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fwi {

// A JSON object built field by field, in insertion order. Values are numbers, strings, booleans or
// nested objects; that is all a RESULT line needs.
class JsonObject {
public:
    JsonObject& add(const std::string& key, double value);
    JsonObject& add(const std::string& key, int value) { return add(key, static_cast<long long>(value)); }
    JsonObject& add(const std::string& key, long long value);
    JsonObject& add(const std::string& key, bool value);
    JsonObject& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
    JsonObject& add(const std::string& key, const std::string& value);
    JsonObject& add(const std::string& key, const JsonObject& value);
    std::string str() const;

private:
    std::vector<std::pair<std::string, std::string>> fields_;  // key, encoded value
};

std::string json_quote(const std::string& text);

// Prints `RESULT {json}` on stdout and, when json_path is not empty, writes the object to that file.
void emit_result(const JsonObject& result, const std::string& json_path);

// Writes a C-order float32 array as a NumPy .npy file (format version 1.0). Throws on I/O failure.
void write_npy(const std::string& path, const float* data, const std::vector<size_t>& shape);

// Creates a directory and its parents if missing. Throws UsageError if it cannot.
void make_directories(const std::string& path);

}  // namespace fwi
