#include "output.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "errors.hpp"

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

JsonObject& JsonObject::add(const std::string& key, double value) {
    // JSON has no NaN or infinity; null says "no value" honestly.
    if (!std::isfinite(value)) {
        fields_.emplace_back(key, "null");
        return *this;
    }
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", value);
    fields_.emplace_back(key, text);
    return *this;
}

JsonObject& JsonObject::add(const std::string& key, long long value) {
    fields_.emplace_back(key, std::to_string(value));
    return *this;
}

JsonObject& JsonObject::add(const std::string& key, bool value) {
    fields_.emplace_back(key, value ? "true" : "false");
    return *this;
}

JsonObject& JsonObject::add(const std::string& key, const std::string& value) {
    fields_.emplace_back(key, json_quote(value));
    return *this;
}

JsonObject& JsonObject::add(const std::string& key, const JsonObject& value) {
    fields_.emplace_back(key, value.str());
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
    const std::string text = result.str();
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
