# Across nodes (README.md, "Across nodes"), on the CPU: the launch recipes of scripts/cluster/ (every
# script's syntax, the #SBATCH lines, and the launch line each recipe prints in a dry run, in and out of a
# fake Slurm allocation and from a hostfile; tests/cluster_scripts_test.sh), and the node-local rank that
# picks each rank's GPU, with the ranks placed on several fake nodes under mpirun (test_node_local_rank.cpp).
add_test(NAME cluster_launch_recipes
         COMMAND ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/cluster_scripts_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(cluster_launch_recipes PROPERTIES LABELS cpu TIMEOUT 60)

add_executable(test_node_local_rank mpi_test_main.cpp test_node_local_rank.cpp)
target_link_libraries(test_node_local_rank PRIVATE fwi_mpi doctest::doctest)
foreach(ranks 1 4 6)
  add_test(NAME node_local_rank_${ranks}_ranks COMMAND ${MPIRUN_TEST} ${ranks} $<TARGET_FILE:test_node_local_rank> --ranks=${ranks})
  set_tests_properties(node_local_rank_${ranks}_ranks PROPERTIES LABELS "cpu;mpi" TIMEOUT 120 PROCESSORS ${ranks}
                       ENVIRONMENT "${MPI_TEST_ENVIRONMENT}")
endforeach()

# NCCL's bootstrap over MPI where rank 0 cannot make NCCL's id (test_nccl_bootstrap.cpp): no GPU needed, as
# ncclGetUniqueId fails first, on an interface name that no node has.
add_executable(test_nccl_bootstrap mpi_test_main.cpp test_nccl_bootstrap.cpp)
target_link_libraries(test_nccl_bootstrap PRIVATE fwi_nccl_mpi doctest::doctest)
add_test(NAME nccl_bootstrap_rank0_without_id COMMAND ${MPIRUN_TEST} 2 $<TARGET_FILE:test_nccl_bootstrap> --ranks=2)
set_tests_properties(nccl_bootstrap_rank0_without_id PROPERTIES LABELS "cpu;mpi" TIMEOUT 120 PROCESSORS 2
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT};NCCL_SOCKET_IFNAME=fwi-no-such-interface0;CUDA_VISIBLE_DEVICES=")
