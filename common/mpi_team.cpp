#include "mpi_team.hpp"

#include <cstring>

#include "mpi_check.hpp"
#include "mpi_env.hpp"

namespace fwi {

MpiTeam::MpiTeam(MPI_Comm comm, double timeout_s) : comm_(comm), timeout_s_(timeout_s) {
    MPI_CHECK(MPI_Comm_size(comm, &size_));
}

void MpiTeam::barrier(int, const std::string& what) { barrier_with_timeout(comm_, what, timeout_s_); }

void MpiTeam::wait_for_member0_setup(int member, double setup_seconds) {
    barrier_with_timeout(comm_, "every rank's set-up (rank 0's also models every shot for the single-GPU reference)",
                         member0_allowance(member, size_, setup_seconds) + timeout_s_);
}

std::vector<std::vector<double>> MpiTeam::gather(int member, const std::vector<double>& values) {
    const int count = static_cast<int>(values.size());
    std::vector<double> all(member == 0 ? values.size() * size_ : 0);
    {
        WaitTimeout guard("the other ranks' timings", timeout_s_);
        MPI_CHECK(MPI_Gather(values.data(), count, MPI_DOUBLE, all.data(), count, MPI_DOUBLE, 0, comm_));
    }
    std::vector<std::vector<double>> per_rank;
    for (int r = 0; member == 0 && r < size_; ++r)
        per_rank.emplace_back(all.begin() + size_t(r) * count, all.begin() + size_t(r + 1) * count);
    return per_rank;
}

bool MpiTeam::same_on_all(int, const std::vector<float>& model) {
    std::vector<float> root = model;
    int identical = 0;
    WaitTimeout guard("rank 0's model", timeout_s_);
    MPI_CHECK(MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, comm_));
    int mine = std::memcmp(root.data(), model.data(), model.size() * sizeof(float)) == 0;
    MPI_CHECK(MPI_Allreduce(&mine, &identical, 1, MPI_INT, MPI_MIN, comm_));
    return identical == 1;
}

}  // namespace fwi
