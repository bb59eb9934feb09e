"""asv, pr-check, compare-commits, nightly, dashboard and init: the harness in a repository's CI."""
