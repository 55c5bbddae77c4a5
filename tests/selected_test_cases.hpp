// How many test cases a doctest run's filters selected. doctest exits 0 when none failed, also when none
// ran: a --test-suite or --test-case filter that a renamed suite or case no longer matches would pass a
// GPU test having tested nothing. The mains of the GPU tests fail such a run instead
// (run_selected_test_cases). Include it in one file of a test program only: it registers a listener.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>

namespace fwi {

class SelectedTestCases : public doctest::IReporter {
public:
    explicit SelectedTestCases(const doctest::ContextOptions&) {}
    static unsigned& count() {
        static unsigned selected = 0;
        return selected;
    }
    void test_run_end(const doctest::TestRunStats& stats) override { count() = stats.numTestCasesPassingFilters; }
    // The rest is the other reporters' business.
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("selected_test_cases", 1, SelectedTestCases);

// Runs `context`; a run that selected no test case fails (exit 1), saying so. --help, --list-test-cases and
// the like run no test and pass as doctest has them.
inline int run_selected_test_cases(doctest::Context& context) {
    const int status = context.run();
    if (status != 0 || context.shouldExit()) return status;
    if (SelectedTestCases::count() == 0) {
        std::printf("FAILED: the filters select no test case (a suite or case renamed?): nothing was tested\n");
        return 1;
    }
    return status;
}

}  // namespace fwi
