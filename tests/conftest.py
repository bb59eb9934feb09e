"""pytest configuration shared by every test module (markers are declared in pyproject.toml).

`make test` (CI) runs everything; `make test-fast` leaves out the e2e tests."""
