// The node-local rank and the GPU each rank takes from it (common/mpi_env.hpp), with the ranks on several
// nodes, on one machine and without a GPU: under mpirun --oversubscribe, FWI_TEST_NODE_OF_RANK places the
// ranks on fake nodes the way launchers place them on real ones (in blocks, --map-by ppr:k:node; dealt
// round-robin, --map-by node; unevenly). Every rank must get the number of ranks before it on its node,
// and the ranks of a node must take distinct GPUs 0, 1, ... whatever the placement. Also the gather by
// which rank 0 prints where each rank runs (gather_on_rank0).
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "mpi_env.hpp"

using namespace fwi;

namespace {

using Placement = std::function<int(int rank)>;  // rank -> node

// Puts every rank on placement(rank)'s fake node for the life of the object.
class FakeNodes {
public:
    explicit FakeNodes(const Placement& placement) {
        std::string list;
        for (int rank = 0; rank < world_size(); ++rank) list += (rank ? "," : "") + std::to_string(placement(rank));
        setenv("FWI_TEST_NODE_OF_RANK", list.c_str(), 1);
    }
    explicit FakeNodes(const std::string& list) { setenv("FWI_TEST_NODE_OF_RANK", list.c_str(), 1); }
    ~FakeNodes() { unsetenv("FWI_TEST_NODE_OF_RANK"); }
    FakeNodes(const FakeNodes&) = delete;
    FakeNodes& operator=(const FakeNodes&) = delete;
};

// What node_local_rank should say for `rank`: the ranks before it on its node, and the ranks on it.
NodeLocalRank expected(const Placement& placement, int rank) {
    NodeLocalRank local{0, 0};
    for (int other = 0; other < world_size(); ++other)
        if (placement(other) == placement(rank)) {
            local.rank += other < rank;
            ++local.size;
        }
    return local;
}

// Checks this rank's node-local rank, then gathers every rank's (node, GPU) and checks that no two ranks
// of a node share a GPU when the node has as many GPUs as ranks.
void check_placement(const Placement& placement) {
    const int rank = world_rank();
    NodeLocalRank local;
    {
        const FakeNodes nodes(placement);
        local = node_local_rank(MPI_COMM_WORLD);
    }
    const NodeLocalRank want = expected(placement, rank);
    CHECK(local.rank == want.rank);
    CHECK(local.size == want.size);

    // Every rank of the node sees all of its GPUs, one per rank.
    std::vector<std::string> node_gpus;
    for (int g = 0; g < local.size; ++g) node_gpus.push_back("gpu" + std::to_string(g));
    const std::vector<std::vector<std::string>> visible(size_t(local.size), node_gpus);
    const int mine[2] = {placement(rank), choose_gpus_on_node(visible)[size_t(local.rank)]};
    std::vector<int> all(2 * size_t(world_size()));
    REQUIRE(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
    std::set<std::pair<int, int>> taken;
    for (int other = 0; other < world_size(); ++other) {
        const int node = all[2 * size_t(other)], gpu = all[2 * size_t(other) + 1];
        CHECK(gpu >= 0);
        CHECK(gpu < expected(placement, other).size);
        CHECK(taken.insert({node, gpu}).second);  // a GPU of a node is taken once
    }
}

}  // namespace

TEST_CASE("without fake nodes every rank of this machine is on one node, in rank order") {
    const NodeLocalRank local = node_local_rank(MPI_COMM_WORLD);
    CHECK(local.rank == world_rank());
    CHECK(local.size == world_size());
}

TEST_CASE("ranks in blocks of k per node, as mpirun --map-by ppr:k:node or srun --ntasks-per-node=k place them") {
    for (int k = 1; k <= world_size(); ++k) {
        CAPTURE(k);
        check_placement([k](int rank) { return rank / k; });
    }
}

TEST_CASE("ranks dealt round-robin over m nodes, as mpirun --map-by node places them") {
    for (int m = 1; m <= world_size(); ++m) {
        CAPTURE(m);
        check_placement([m](int rank) { return rank % m; });
    }
}

TEST_CASE("nodes of different sizes, named by any numbers") {
    // 6 ranks: node 7 holds ranks 0, 2, 5; node 3 holds 1 and 4; node 0 holds 3.
    const std::vector<int> nodes{7, 3, 7, 0, 3, 7};
    check_placement([&nodes](int rank) { return nodes[size_t(rank) % nodes.size()] + 10 * (rank / 6); });
}

TEST_CASE("the GPU each rank of a node takes, from the GPUs each one sees") {
    using Visible = std::vector<std::vector<std::string>>;
    const std::vector<std::string> four{"0000:18:00.0", "0000:2A:00.0", "0000:3A:00.0", "0000:5D:00.0"};
    // Every rank sees every GPU: they are taken in turn, and a fifth rank shares GPU 0 (which
    // select_gpu_for_rank then refuses or warns about).
    CHECK(choose_gpus_on_node(Visible(4, four)) == std::vector<int>{0, 1, 2, 3});
    CHECK(choose_gpus_on_node(Visible(5, four)) == std::vector<int>{0, 1, 2, 3, 0});
    CHECK(choose_gpus_on_node(Visible(8, four)) == std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3});
    // A launcher that gives each rank one GPU of its own: every rank takes its device 0.
    CHECK(choose_gpus_on_node(Visible{{four[2]}, {four[0]}, {four[3]}}) == std::vector<int>{0, 0, 0});
    // Slurm's --gpu-bind=closest with tasks dealt over two sockets: local tasks 0 and 2 see the first
    // socket's GPUs, 1 and 3 the second's. Node-local rank modulo the GPUs seen would put ranks 0 and 2 on
    // one GPU and 1 and 3 on another, leaving two idle; each takes a GPU of its own.
    const std::vector<std::string> first{four[0], four[1]}, second{four[2], four[3]};
    CHECK(choose_gpus_on_node(Visible{first, second, first, second}) == std::vector<int>{0, 0, 1, 1});
    // Sets that overlap in part: a free GPU, the first in the rank's own order.
    CHECK(choose_gpus_on_node(Visible{{four[0], four[1]}, {four[1], four[0]}, {four[0], four[2]}}) ==
          std::vector<int>{0, 0, 1});
    // A rank that sees only a GPU an earlier rank took: the earlier one moves to another it sees, so that no
    // two share while a GPU is free (taking the first free GPU in turn would give both GPU 0).
    CHECK(choose_gpus_on_node(Visible{{four[0], four[1]}, {four[0]}}) == std::vector<int>{1, 0});
    const std::vector<std::string> ab{four[0], four[1]}, cd{four[2], four[3]};
    CHECK(choose_gpus_on_node(Visible{four, ab, ab, cd}) == std::vector<int>{2, 1, 0, 1});
    // A rank that sees no GPU takes none.
    CHECK(choose_gpus_on_node(Visible{{}, {four[0]}}) == std::vector<int>{-1, 0});
}

TEST_CASE("sharing is judged by the GPUs' bus ids, not by device numbers") {
    // Each rank given its own GPU by the launcher (every one is device 0 to itself): no sharing.
    const GpusOnNode own = gpus_on_node({"0000:18:00.0", "0000:2A:00.0", "0000:3A:00.0"}, 1);
    CHECK(own.distinct == 3);
    CHECK(own.sharing_mine == std::vector<int>{1});
    // Five ranks on four GPUs: ranks 0 and 4 share the first.
    const std::vector<std::string> five{"0000:18:00.0", "0000:2A:00.0", "0000:3A:00.0", "0000:5D:00.0", "0000:18:00.0"};
    CHECK(gpus_on_node(five, 4).distinct == 4);
    CHECK(gpus_on_node(five, 4).sharing_mine == std::vector<int>{0, 4});
    CHECK(gpus_on_node(five, 2).sharing_mine == std::vector<int>{2});
    CHECK(one_gpu_per_rank_refusal(5, "node-a", 4) ==
          "5 ranks on host node-a share 4 GPUs; this program needs one GPU per rank: start at most 4 ranks per node "
          "(mpirun -np N --map-by ppr:4:node)");
    CHECK(one_gpu_per_rank_refusal(2, "vm", 1) ==
          "2 ranks on host vm share 1 GPU; this program needs one GPU per rank: start at most 1 rank per node "
          "(mpirun -np N --map-by ppr:1:node)");
}

TEST_CASE("a fake-node list that does not fit is refused on every rank, naming the variable") {
    {
        const FakeNodes nodes(std::string("0"));
        if (world_size() > 1)
            CHECK_THROWS_WITH_AS(node_local_rank(MPI_COMM_WORLD),
                                 doctest::Contains("FWI_TEST_NODE_OF_RANK: 1 node number for"), UsageError);
    }
    // Digits only, as the flags' lists: no blank, no sign; a control character shown escaped.
    for (const auto& [first, shown] :
         std::vector<std::pair<std::string, std::string>>{{"x", "x"}, {" 0", " 0"}, {"+0", "+0"}, {"\x01", "\\x01"}}) {
        std::string list = first;
        for (int rank = 1; rank < world_size(); ++rank) list += ",0";
        const FakeNodes nodes(list);
        const std::string expected = "FWI_TEST_NODE_OF_RANK: '" + shown + "' is not a node number";
        CHECK_THROWS_WITH_AS(node_local_rank(MPI_COMM_WORLD), doctest::Contains(expected.c_str()), UsageError);
    }
    // An empty entry too, as a variable's bad value (BadSettingError: no hint to --help, which lists no variable).
    std::string list = "0,";
    for (int rank = 1; rank < world_size(); ++rank) list += ",0";
    const FakeNodes nodes(list);
    CHECK_THROWS_WITH_AS(node_local_rank(MPI_COMM_WORLD), doctest::Contains("FWI_TEST_NODE_OF_RANK"), BadSettingError);
}

TEST_CASE("rank 0 gathers every rank's line in rank order, whatever their lengths") {
    // Rank r sends r copies of its letter (rank 0 an empty line), and rank 3 a line past any fixed buffer.
    const int rank = world_rank();
    const auto line_of = [](int r) { return std::string(r == 3 ? 1000 : size_t(r), char('a' + r % 26)); };
    const std::vector<std::string> lines = gather_on_rank0(line_of(rank), "the test's lines", 60.0);
    if (rank != 0) {
        CHECK(lines.empty());
        return;
    }
    REQUIRE(int(lines.size()) == world_size());
    for (int r = 0; r < world_size(); ++r) CHECK(lines[size_t(r)] == line_of(r));
}

TEST_CASE("launch_mismatch: the advice names the rank count; a count no int can hold is refused") {
    const std::string world = launch_mismatch(1, {{"WORLD_SIZE", "4"}});
    CHECK(world.find("(WORLD_SIZE=4, set by torchrun") != std::string::npos);
    CHECK(world.find("`mpirun -np 4`") != std::string::npos);  // the launch to use, with N filled in
    CHECK(launch_mismatch(1, {{"SLURM_NTASKS", "2"}}).find("`srun --mpi=pmix -n 2`") != std::string::npos);
    CHECK(launch_mismatch(1, {{"OMPI_COMM_WORLD_SIZE", "2147483647"}}).find("says 2147483647 ranks") !=
          std::string::npos);
    // One past INT_MAX: strtoll reads it without ERANGE, but MPI counts ranks in an int.
    CHECK_THROWS_WITH_AS(launch_mismatch(1, {{"OMPI_COMM_WORLD_SIZE", "2147483648"}}),
                         doctest::Contains("OMPI_COMM_WORLD_SIZE=2147483648 (set by Open MPI's mpirun) is more ranks "
                                           "than MPI can start"),
                         BadSettingError);
    CHECK(launch_mismatch(4, {{"WORLD_SIZE", "4"}}).empty());  // MPI started the ranks: nothing to check
}
