#include "output.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "errors.hpp"
#include "run_env.hpp"

namespace fwi {

std::string json_quote(const std::string& text) {
    std::string out = "\"";
    for (char ch : text) {
        switch (ch) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
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
    if (json_path.empty()) return;
    std::ofstream file(json_path);
    file << text << "\n";
    if (!file) throw UsageError("--json: cannot write '" + json_path + "'");
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
    std::string header =
        "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text.str() + ", }";
    // The magic (6) + version (2) + header length (2) + header + newline is padded to a multiple of 64.
    const size_t unpadded = 10 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';

    std::ofstream file(path, std::ios::binary);
    const unsigned char preamble[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    file.write(reinterpret_cast<const char*>(preamble), sizeof preamble);
    const uint16_t header_length = static_cast<uint16_t>(header.size());
    const unsigned char length_bytes[2] = {static_cast<unsigned char>(header_length & 0xff),
                                           static_cast<unsigned char>(header_length >> 8)};
    file.write(reinterpret_cast<const char*>(length_bytes), 2);
    file.write(header.data(), static_cast<std::streamsize>(header.size()));
    file.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(float)));
    if (!file) throw EnvironmentError("cannot write '" + path + "'");
}

void make_directories(const std::string& path) {
    std::error_code error;
    std::filesystem::create_directories(path, error);
    if (error) throw UsageError("--out: cannot create directory '" + path + "': " + error.message());
}

}  // namespace fwi
