# data_safety tests (see tests/README.md, "Bad input")
