# bad_input_physics tests (see tests/README.md, "Bad input")
