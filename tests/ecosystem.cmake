# Fresh machine and ecosystem tests: the launch-mismatch check and nccl-tests flags (see tests/README.md)
