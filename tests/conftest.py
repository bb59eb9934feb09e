"""pytest configuration shared by every test module."""


def pytest_configure(config):
    # `python -m pytest -m e2e` selects the slow end-to-end proofs; plain `python -m pytest`
    # (make test, CI) runs them too.
    config.addinivalue_line("markers", "e2e: slow end-to-end test (asv over scratch commits, "
                                       "headless Chromium on the dashboard); part of make test")
