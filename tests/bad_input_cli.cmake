# bad_input_cli tests (see tests/README.md, "Bad input")
