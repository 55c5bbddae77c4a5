// The RESULT writer (output.hpp) and the env of every RESULT (run_env.hpp, nvml.hpp), without a GPU: CTest
// runs this with CUDA_VISIBLE_DEVICES empty, so the env is the same on a GPU machine and on a CI machine.
#include <doctest/doctest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "nvml.hpp"
#include "other_processes.hpp"
#include "output.hpp"
#include "run_env.hpp"

using namespace fwi;

namespace {

// Whether `text` is exactly one JSON value (RFC 8259 grammar), so that the tests do not need a JSON library.
class JsonSyntax {
public:
    static bool valid(const std::string& text) {
        JsonSyntax parser(text);
        return parser.value() && parser.at_end();
    }

private:
    explicit JsonSyntax(const std::string& text) : text_(text) {}

    void skip_space() {
        while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    }
    bool at_end() {
        skip_space();
        return pos_ == text_.size();
    }
    bool take(char expected) {
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] != expected) return false;
        ++pos_;
        return true;
    }
    bool literal(const std::string& word) {
        if (text_.compare(pos_, word.size(), word) != 0) return false;
        pos_ += word.size();
        return true;
    }
    bool digits() {
        const size_t start = pos_;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
        return pos_ > start;
    }
    bool number() {
        literal("-");
        if (!literal("0") && !digits()) return false;
        if (literal(".") && !digits()) return false;
        if (literal("e") || literal("E")) {
            if (!literal("+")) literal("-");
            if (!digits()) return false;
        }
        return true;
    }
    bool string() {
        if (!take('"')) return false;
        while (pos_ < text_.size() && text_[pos_] != '"') {
            if (static_cast<unsigned char>(text_[pos_]) < 0x20) return false;
            if (text_[pos_] == '\\') {
                ++pos_;
                if (pos_ >= text_.size()) return false;
                if (text_[pos_] == 'u') {
                    for (int i = 1; i <= 4; ++i)
                        if (pos_ + i >= text_.size() || !std::isxdigit(static_cast<unsigned char>(text_[pos_ + i])))
                            return false;
                    pos_ += 4;
                } else if (std::string("\"\\/bfnrt").find(text_[pos_]) == std::string::npos) {
                    return false;
                }
            }
            ++pos_;
        }
        return take('"');
    }
    template <typename Element>
    bool sequence(char open, char close, const Element& element) {
        if (!take(open)) return false;
        if (take(close)) return true;
        do {
            if (!element()) return false;
        } while (take(','));
        return take(close);
    }
    bool value() {
        skip_space();
        if (pos_ >= text_.size()) return false;
        switch (text_[pos_]) {
            case '{':
                return sequence('{', '}', [this] { return string() && take(':') && value(); });
            case '[':
                return sequence('[', ']', [this] { return value(); });
            case '"':
                return string();
            case 't':
                return literal("true");
            case 'f':
                return literal("false");
            case 'n':
                return literal("null");
            default:
                return number();
        }
    }

    const std::string& text_;
    size_t pos_ = 0;
};

// The encoded text of one value: {"v": <value>} without its frame.
std::string encoded(const JsonValue& value) { return value.str(); }

}  // namespace

TEST_CASE("the JSON syntax check of these tests accepts JSON and refuses the rest") {
    CHECK(JsonSyntax::valid(R"({"a": [1, -2.5e-3, "x\n\u0001", true, null, {}], "b": []})"));
    CHECK_FALSE(JsonSyntax::valid(R"({"a": NaN})"));
    CHECK_FALSE(JsonSyntax::valid(R"({"a": 1,})"));
    CHECK_FALSE(JsonSyntax::valid(R"({"a": "tab	inside"})"));
    CHECK_FALSE(JsonSyntax::valid(R"([1] [2])"));
}

TEST_CASE("integers are written exactly, whatever their width") {
    CHECK(encoded((1LL << 53) + 1) == "9007199254740993");  // the first integer a double cannot hold
    CHECK(encoded(size_t(12345678901234)) == "12345678901234");
    CHECK(encoded(std::numeric_limits<unsigned long long>::max()) == "18446744073709551615");
    CHECK(encoded(std::numeric_limits<long long>::min()) == "-9223372036854775808");
    CHECK(encoded(-7) == "-7");
    CHECK(encoded(3u) == "3");
}

TEST_CASE("doubles are written in the shortest text that reads back as the same double") {
    CHECK(encoded(0.1) == "0.1");
    CHECK(encoded(0.5) == "0.5");
    CHECK(encoded(2.0) == "2");
    CHECK(encoded(-0.0255926) == "-0.0255926");
    for (const double value : {1.0 / 3.0, 0.0255926318, 6.02214076e23, 1e-300, 4.9e-324, 1.7976931348623157e308,
                               123456789.123456789, -2.5e-7}) {
        const std::string text = encoded(value);
        CAPTURE(text);
        CHECK(std::strtod(text.c_str(), nullptr) == value);
        CHECK(JsonSyntax::valid(text));
    }
    CHECK(encoded(0.5f) == "0.5");  // a float is written as the double it converts to
}

TEST_CASE("NaN and infinities are null, as are nullptr and an empty optional") {
    CHECK(encoded(std::nan("")) == "null");
    CHECK(encoded(std::numeric_limits<double>::infinity()) == "null");
    CHECK(encoded(-std::numeric_limits<double>::infinity()) == "null");
    CHECK(encoded(nullptr) == "null");
    CHECK(encoded(std::optional<double>()) == "null");
    CHECK(encoded(std::optional<double>(1.5)) == "1.5");
    CHECK(encoded(std::optional<JsonObject>(JsonObject().add("a", 1))) == R"({"a": 1})");
}

TEST_CASE("strings are escaped") {
    CHECK(encoded("a \"quoted\" back\\slash") == R"("a \"quoted\" back\\slash")");
    CHECK(encoded("line\nnext\ttab") == R"("line\nnext\ttab")");
    CHECK(encoded(std::string("bell\x01")) == R"("bell\u0001")");
    CHECK(JsonSyntax::valid(encoded(std::string("every control character: \x01\x02\x1f\r\b\f"))));
    CHECK(encoded(true) == "true");
    CHECK(encoded(false) == "false");
}

TEST_CASE("arrays hold numbers, integers, strings and objects, and nest") {
    CHECK(encoded(std::vector<int>{384, 512}) == "[384, 512]");
    CHECK(encoded(std::vector<double>{0.5, std::nan("")}) == "[0.5, null]");
    CHECK(encoded(std::vector<size_t>{size_t(1) << 40}) == "[1099511627776]");
    CHECK(encoded(std::vector<std::string>{"a", "b\"c"}) == R"(["a", "b\"c"])");
    CHECK(encoded(std::vector<int>{}) == "[]");
    const std::vector<JsonObject> rows{JsonObject().add("bytes", 4).add("ok", true), JsonObject()};
    CHECK(encoded(rows) == R"([{"bytes": 4, "ok": true}, {}])");
    CHECK(encoded(JsonArray().add(1).add("two").add(nullptr).add(JsonArray().add(3.5))) ==
          R"([1, "two", null, [3.5]])");
    CHECK(encoded(std::vector<std::vector<int>>{{1, 2}, {3}}) == "[[1, 2], [3]]");
}

TEST_CASE("objects keep their insertion order, nest, and append another object's fields") {
    JsonObject inner;
    inner.add("min", 0.25).add("median", 0.5).add("max", 1);
    JsonObject result;
    result.add("kind", "fwi")
        .add("grid", std::vector<int>{384, 512})
        .add("phases_s", JsonObject().add("compute", inner));
    result.append(JsonObject().add("verified", true));
    const std::string text = result.str();
    CHECK(text ==
          R"({"kind": "fwi", "grid": [384, 512], "phases_s": {"compute": {"min": 0.25, "median": 0.5, "max": 1}}, )"
          R"("verified": true})");
    CHECK(JsonSyntax::valid(text));
    CHECK(JsonObject().str() == "{}");
}

TEST_CASE("without a GPU the env is valid JSON with no GPUs, and lists the NCCL_ variables set") {
    setenv("NCCL_RESULT_TEST_SETTING", "a \"quoted\" value", 1);
    set_env_field("nccl_version", "2.28.3");
    const std::string env = run_env_json().str();
    CAPTURE(env);
    CHECK(JsonSyntax::valid(env));
    CHECK(env.rfind(R"({"hostname": ")", 0) == 0);
    CHECK(env.find(R"("gpu_count": 0, "gpus": [])") != std::string::npos);
    CHECK(env.find(R"("links": [])") != std::string::npos);
    CHECK(env.find(R"("nccl_version": "2.28.3", "mpi_library_version": null)") != std::string::npos);
    CHECK(env.find(R"("NCCL_RESULT_TEST_SETTING": "a \"quoted\" value")") != std::string::npos);
    CHECK(env.find(R"("nccl_env": {)") != std::string::npos);
    for (const char* key :
         {"utc_time", "git_commit", "build_type", "cuda_architectures", "driver_version", "cuda_runtime_version"})
        CHECK(env.find(std::string("\"") + key + "\": ") != std::string::npos);
    unsetenv("NCCL_RESULT_TEST_SETTING");
    CHECK(run_env_json().str().find("NCCL_RESULT_TEST_SETTING") == std::string::npos);  // read at every call
}

TEST_CASE("CUDA version codes read as major.minor") {
    CHECK(cuda_version_text(13000) == "13.0");
    CHECK(cuda_version_text(12080) == "12.8");
}

TEST_CASE("link labels read like nvidia-smi topo -m") {
    CHECK(link_label(Link{18, "SYS"}) == "NV18");
    CHECK(link_label(Link{0, "PIX"}) == "PIX");
    CHECK(link_label(Link{}) == "?");
    CHECK(pcie_path_name(10) == "PIX");
    CHECK(pcie_path_name(30) == "PHB");
    CHECK(pcie_path_name(50) == "SYS");
}

TEST_CASE("NVML is optional: without libnvidia-ml the object says why and answers 'unknown'") {
    const Nvml nvml;
    if (nvml.available()) {  // a machine with the driver: NVML answers
        MESSAGE("NVML is available on this machine: only the available path is exercised");
        CHECK(nvml.error().empty());
        CHECK(nvml.gpu_count() >= 0);
        CHECK_FALSE(nvml.driver_version().empty());
        CHECK(nvml.links({}).empty());
        return;
    }
    CHECK(nvml.error().find("NVML not available") != std::string::npos);
    CHECK(nvml.gpu_count() == -1);
    CHECK(nvml.driver_version().empty());
    CHECK(nvml.gpus_in_mig_mode().empty());
    CHECK_THROWS(nvml.links({}));
    // The per-GPU questions say NVML is missing, which their callers turn into "unknown".
    const PciAddress gpu{0, 0x1b, 0, "0000:1B:00.0"};
    CHECK_THROWS_WITH(nvml.peer_readable(gpu, gpu), doctest::Contains("NVML not available"));
    CHECK_THROWS_WITH(nvml.pcie_replays(gpu), doctest::Contains("NVML not available"));
}

TEST_CASE("other processes on the GPUs: the caller's are left out, and each other is named once per GPU") {
    const auto name_of = [](unsigned pid) { return pid == 4242 ? std::string("python3") : std::string(); };
    // GPU 0: the caller (10) and python3; GPU 1: python3 again and a process /proc does not show.
    const OtherProcesses found = split_gpu_processes(
        {{{10, 1LL << 30}, {4242, 20LL << 30}}, {{4242, 512LL << 20}, {77, -1}, {10, 0}}}, {10}, true, name_of);
    REQUIRE(found.named.size() == 3);
    CHECK(found.unnamed.empty());
    CHECK(found.hidden.empty());
    CHECK(found.process_count() == 2);  // python3 is one process on two GPUs
    CHECK(found.gpu_count() == 2);
    const std::vector<std::string> lines = other_process_lines(found);
    REQUIRE(lines.size() == 3);
    CHECK(lines[0] == "GPU 0: pid 4242 (python3, 20.0 GiB)");
    CHECK(lines[1] == "GPU 1: pid 4242 (python3, 512 MiB)");
    CHECK(lines[2] == "GPU 1: pid 77 (not visible from here)");
    // The caller's processes alone (doctor's ranks on one host): nothing to say.
    CHECK(split_gpu_processes({{{10, 0}}, {{10, 0}, {11, 0}}}, {10, 11}, true, name_of).process_count() == 0);
    // A caller without a context (visible_gpus, before compare.sh's runs): every listed process but its own
    // is another, and an empty list is only an idle GPU.
    const OtherProcesses from_outside = split_gpu_processes({{{900, 0}, {10, 0}, {901, 0}}, {}}, {10}, false, name_of);
    CHECK(from_outside.named.size() == 2);
    CHECK(from_outside.hidden.empty());
}

TEST_CASE("other processes: where the caller holds a context but is not listed, the driver's ids are not ours") {
    const auto no_name = [](unsigned) { return std::string(); };
    // The caller is pid 10 here. GPU 0 lists 3 processes and none is the caller's: the caller under the
    // driver's numbers and 2 others. GPU 1 lists only the caller under its other number: none. GPU 2 lists
    // nothing, not even the caller: hidden.
    const OtherProcesses in_container =
        split_gpu_processes({{{900, 0}, {901, 0}, {902, 0}}, {{900, 0}}, {}}, {10}, true, no_name);
    CHECK(in_container.named.empty());
    REQUIRE(in_container.unnamed.size() == 1);
    CHECK(in_container.unnamed[0].gpu == 0);
    CHECK(in_container.unnamed[0].count == 2);
    CHECK(in_container.hidden == std::vector<int>{2});
    CHECK(in_container.process_count() == 2);
    CHECK(in_container.gpu_count() == 1);
    const std::vector<std::string> lines = other_process_lines(in_container);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0] == "GPU 0: 2 other processes, not named (the driver's process ids are another PID namespace's)");
    CHECK(lines[1] == "GPU 2: the driver lists no process, not even this one, so others may be hidden too");
    // Named on one GPU and unnamed on another: each counts.
    OtherProcesses mixed = in_container;
    mixed.named.push_back({1, 4242, -1, "python3"});
    CHECK(mixed.process_count() == 3);
    CHECK(mixed.gpu_count() == 2);
}

TEST_CASE("other processes: MIG instances and a missing NVML are said, not guessed") {
    const Nvml nvml;
    const std::vector<PciAddress> one_gpu{{0, 0x1b, 0, "0000:1B:00.0"}};
    const char* before = std::getenv("CUDA_VISIBLE_DEVICES");
    const std::string saved = before ? before : "";
    setenv("CUDA_VISIBLE_DEVICES", "MIG-5c9e1c56-1a2b-5d4e-8f00-123456789abc", 1);
    const OtherProcesses mig = find_other_processes(nvml, one_gpu, {10}, false);
    const OtherProcesses mig_without_gpus = find_other_processes(nvml, {}, {10}, false);
    before ? setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1) : unsetenv("CUDA_VISIBLE_DEVICES");
    CHECK(mig.process_count() == 0);
    CHECK(mig.unknown.find("MIG instances") != std::string::npos);
    CHECK(mig_without_gpus.unknown.empty());  // no GPU: nothing to list
    CHECK(find_other_processes(nvml, {}, {10}, false).unknown.empty());
    if (nvml.available()) return;
    const OtherProcesses without_nvml = find_other_processes(nvml, {one_gpu[0], one_gpu[0]}, {10}, false);
    CHECK(without_nvml.process_count() == 0);
    CHECK(without_nvml.unknown == "not listed: " + nvml.error());  // once, not once per GPU
}
