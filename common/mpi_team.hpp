// A Team of MPI ranks, one GPU each (team.hpp): the barrier and the gathers are MPI calls, each under a
// WaitTimeout, so a rank that died ends the job with exit 3 instead of a hang.
#pragma once

#include <mpi.h>

#include "team.hpp"

namespace fwi {

class MpiTeam final : public Team {
public:
    MpiTeam(MPI_Comm comm, double timeout_s);
    int size() const override { return size_; }
    int ranks() const override { return size_; }
    void barrier(int member, const std::string& what) override;
    void wait_for_member0_setup(int member, double setup_seconds) override;
    std::vector<std::vector<double>> gather(int member, const std::vector<double>& values) override;
    bool same_on_all(int member, const std::vector<float>& model) override;

private:
    MPI_Comm comm_;
    double timeout_s_;
    int size_ = 1;
};

}  // namespace fwi
